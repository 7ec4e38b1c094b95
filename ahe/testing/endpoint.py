"""`mock_endpoint`: the scripted MOCK server as a context manager, for commands that take
`--mock-policy` (run, eval, evolve, debug, transfer)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def mock_endpoint(policy_file: Path | None) -> Iterator[str | None]:
    """Start the scripted MOCK model server for the duration of the block, if asked to;
    yields its base URL (None when no policy file is given)."""
    if policy_file is None:
        yield None
        return
    from ahe.testing.policy import load_policy
    from ahe.testing.server import MockLLMServer

    server = MockLLMServer(load_policy(policy_file))
    try:
        yield server.start()
    finally:
        server.stop()
