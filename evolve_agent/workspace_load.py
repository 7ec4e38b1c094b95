"""Whether a harness workspace loads: its imports probed in a jail first, then the runtime's loader."""

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


def load_problem(root: Path) -> str | None:
    """None when the workspace loads in the runtime; else the loader's one-line error."""
    from ahe.errors import ConfigError
    from ahe.runtime import load_agent

    purge_pycache(root)  # a stale .pyc of a same-size edit in the same second must not be used
    from evolve_agent.import_probe import import_side_effects

    acts = import_side_effects(root)  # before AHE's own process imports any of it
    if acts:
        return ("importing the workspace's code acts outside the workspace, which is refused: "
                + "; ".join(acts[:5]))
    try:
        load_agent(root)
    except ConfigError as exc:
        return str(exc)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
