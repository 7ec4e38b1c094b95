"""Regression foresight: replay recorded trajectories through a proposed change (docs/foresight.md).

    replay_change(repo, commit, iteration_dir) -> ReplayReport        in this process
    replay_change_isolated(...) -> ReplayReport                        in a bounded child process
    summarize(report) -> ReplaySummary                                 what the manifest keeps
    render_for_agent(report) -> str                                    what record_change answers

Imports are lazy: the experiment config needs `ReplaySettings` without loading the engine.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ReplayReport": "models", "ReplaySettings": "models", "summarize": "models",
    "replay_change": "run", "replay_change_async": "run", "replay_change_isolated": "run",
    "render_for_agent": "summary",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'evolve_agent.replay' has no attribute {name!r}")
    return getattr(importlib.import_module(f"evolve_agent.replay.{_EXPORTS[name]}"), name)
