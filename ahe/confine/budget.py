"""A trial's model budget, read from the harness's agent.yaml as data (its code is never imported here)."""

from __future__ import annotations

from pathlib import Path

from ahe.confine.gateway import GatewayBudget

# Middleware side calls and sub-agents share the trial's requests: a session may make up to this
# many times its own max_turns before the gateway refuses more.
REQUESTS_PER_TURN = 4


def trial_budget(workspace: Path) -> GatewayBudget:
    from ahe.runtime.config import load_agent_config

    try:
        max_turns = load_agent_config(Path(workspace) / "agent.yaml").max_turns
    except Exception:  # the worker reports a broken agent.yaml with its own message
        return GatewayBudget()
    return GatewayBudget(max_requests=REQUESTS_PER_TURN * max_turns)
