"""The evolve agent: the decision layer that edits the harness and predicts each edit's effect.

Public API:
- `run_evolve_phase(...)`, `EvolveLimits` — one evolve phase for the loop (evolve_agent.phase);
- `run_gate(...)`, `Gate` — the validation gate (evolve_agent.gate);
- `ChangeEntry`, `Evidence`, `Manifest` — the manifest schema, re-exported from ahe.harness.manifest;
- `LeakIndex` — the leakage lint; `smoke_check`, `smoke_policy` — smoke sessions.

Imports are lazy so that importing one part does not load the agent's runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evolve_agent.context import EvolveLimits
    from evolve_agent.gate import Gate, run_gate
    from evolve_agent.leakage import LeakIndex
    from ahe.harness.manifest import ChangeEntry, Evidence, Manifest
    from evolve_agent.phase import WORKSPACE, run_evolve_phase
    from evolve_agent.smoke import smoke_check, smoke_policy

_EXPORTS = {
    "EvolveLimits": "evolve_agent.context",
    "Gate": "evolve_agent.gate",
    "run_gate": "evolve_agent.gate",
    "LeakIndex": "evolve_agent.leakage",
    "ChangeEntry": "ahe.harness.manifest",
    "Evidence": "ahe.harness.manifest",
    "Manifest": "ahe.harness.manifest",
    "WORKSPACE": "evolve_agent.phase",
    "run_evolve_phase": "evolve_agent.phase",
    "smoke_check": "evolve_agent.smoke",
    "smoke_policy": "evolve_agent.smoke",
}

__all__ = [
    "ChangeEntry", "Evidence", "EvolveLimits", "Gate", "LeakIndex", "Manifest", "WORKSPACE",
    "run_evolve_phase", "run_gate", "smoke_check", "smoke_policy",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evolve_agent' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
