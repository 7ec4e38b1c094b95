"""Confinement of harness code (DESIGN.md §11.5): every code-agent session runs in a worker.

The worker is a jail per session (bwrap locally) that imports the workspace's code and runs
`ahe.runtime.Session` there; it sees the workspace read-only, a private size-limited scratch
and one unix socket. Behind that socket the host runs a **model gateway** (keys, retries,
budgets, accounting, the recorded conversation) and the sandbox's exec channel. AHE's own
process never imports the harness's tools or middleware.

    from ahe.confine import run_confined_session   # host side, see host.py

The names below are loaded on first use (PEP 562): the worker imports `ahe.confine.worker`,
which needs none of the host's modules, and starts faster without them.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ConfineMode": "ahe.confine.host",
    "ConfinedSessionSpec": "ahe.confine.host",
    "ConfinedWorker": "ahe.confine.host",
    "GatewayBudget": "ahe.confine.gateway",
    "ModelGateway": "ahe.confine.gateway",
    "check_workspace_loads": "ahe.confine.host",
    "load_problem_confined": "ahe.confine.host",
    "run_confined_session": "ahe.confine.host",
    "trajectory_from_conversation": "ahe.confine.conversation",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ahe.confine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
