"""`ahe mock-llm serve`: run the MOCK model server in the foreground until Ctrl-C.

Nothing heavy is imported at module level so the CLI's start-up stays fast.
"""

from __future__ import annotations

import threading
from pathlib import Path


def serve(policy_file: Path, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Load the policy (a bad one raises ConfigError before anything listens), serve, block."""
    from ahe.testing.server import MockLLMServer

    server = MockLLMServer(Path(policy_file), host=host, port=port)
    base_url = server.start()
    try:
        print(f"MOCK model server (scripted policy {policy_file}) listening on {base_url}", flush=True)
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
