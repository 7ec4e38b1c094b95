"""The load check every entry point runs before anything starts: does this harness load, as its
backend will load it (confined: AHE's process never imports a harness's code)?"""

from __future__ import annotations

import asyncio
import concurrent.futures
from pathlib import Path

from ahe.agents.registry import backend_name, make_agent_backend
from ahe.errors import ConfigError


async def load_problem(harness: Path, isolation: str = "auto", override: str | None = None) -> str | None:
    """None when the harness at `harness` loads under its backend; else one sentence."""
    root = Path(harness)
    if not root.is_dir():
        where = root if root.exists() else root / "agent.yaml"
        what = "not a folder" if root.exists() else "not found"
        return f"{where}: {what} — is {root} a harness folder (with agent.yaml, or a harness.yaml naming its backend)?"
    backend = make_agent_backend(backend_name(root, override))
    try:
        return await backend.load_problem(root, isolation)  # type: ignore[arg-type]
    finally:
        await backend.aclose()


def check_harness_loads(harness: Path, isolation: str = "auto", override: str | None = None) -> None:
    """`load_problem` for synchronous callers: raises ConfigError with the backend's sentence."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # works inside and outside an event loop
        problem = pool.submit(asyncio.run, load_problem(harness, isolation, override)).result()
    if problem:
        raise ConfigError(problem)
