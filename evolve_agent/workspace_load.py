"""Whether a harness workspace loads: its imports probed in a jail first, then loaded by its agent
backend in a confined worker (AHE's own process never imports the harness's code)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def purge_pycache(root: Path) -> None:
    """Remove every __pycache__ below `root` (outside .git)."""
    for dirpath, dirnames, _ in os.walk(root):
        if ".git" in dirnames:
            dirnames.remove(".git")
        if "__pycache__" in dirnames:
            shutil.rmtree(os.path.join(dirpath, "__pycache__"), ignore_errors=True)
            dirnames.remove("__pycache__")


def probe_problem(root: Path) -> str | None:
    """The checks before a worker loads the workspace: harness.yaml names a backend, and for an
    `ahe` harness importing its code does not act outside it (a jail watches). None when both hold."""
    from ahe.agents import backend_name
    from ahe.errors import AheError

    purge_pycache(root)  # a stale .pyc of a same-size edit in the same second must not be used
    try:
        ahe_harness = backend_name(root) == "ahe"
    except AheError as exc:
        return str(exc)
    if ahe_harness:
        from evolve_agent.import_probe import import_side_effects

        acts = import_side_effects(root)
        if acts:
            return ("importing the workspace's code acts outside the workspace, which is refused: "
                    + "; ".join(acts[:5]))
    return None


def load_problem(root: Path) -> str | None:
    """None when the workspace loads as its backend loads it; else the loader's one-line error."""
    import asyncio
    import concurrent.futures

    from ahe.agents.checks import load_problem as confined_load_problem
    from ahe.errors import AheError

    problem = probe_problem(root)
    if problem:
        return problem
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # callable inside and outside an event loop
        try:
            return pool.submit(asyncio.run, confined_load_problem(root)).result()
        except AheError as exc:
            return str(exc)
        except Exception as exc:  # the worker could not even start: say so, never pass the change
            return f"the harness could not be loaded in a confined worker: {type(exc).__name__}: {exc}"
