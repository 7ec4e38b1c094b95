"""A trial's limits at the gateway, read from the harness's agent.yaml files as data (their code
is never imported here): the request budget and the sampling settings the harness declared."""

from __future__ import annotations

from pathlib import Path

from ahe.confine.gateway import GatewayBudget
from ahe.llm.types import LLMSettings

# Middleware side calls and sub-agents share the trial's requests: by default a session may make
# up to this many times its own max_turns before the gateway refuses more. The experiment's
# `model_requests_per_turn` (ahe/rollout/models.py, docs/config.md) sets it per run: the user
# decides, not the harness, whose agent.yaml the evolve agent edits.
REQUESTS_PER_TURN = 4
MAX_DEPTH = 3


def trial_budget(workspace: Path, requests_per_turn: int = REQUESTS_PER_TURN) -> GatewayBudget:
    from ahe.runtime.config import load_agent_config

    if not isinstance(requests_per_turn, int) or requests_per_turn < 1:
        raise ValueError(f"model_requests_per_turn must be a whole number >= 1, not {requests_per_turn!r}")
    try:
        config = load_agent_config(Path(workspace) / "agent.yaml")
    except Exception:  # the worker reports a broken agent.yaml with its own message
        return GatewayBudget()
    return GatewayBudget(max_requests=requests_per_turn * config.max_turns,
                         llm_settings=tuple(declared_settings(Path(workspace))))


def declared_settings(workspace: Path) -> list[LLMSettings]:
    """The `llm:` blocks of the workspace's agent.yaml and of its sub-agents' (the protected
    blocks the gate checks): the only sampling settings a session's requests may carry."""
    from ahe.runtime.config import load_agent_config

    out: list[LLMSettings] = []
    todo = [(Path(workspace) / "agent.yaml", 0)]
    while todo:
        path, depth = todo.pop(0)
        try:
            cfg = load_agent_config(path)
        except Exception:
            continue
        if cfg.llm not in out:
            out.append(cfg.llm)
        if depth < MAX_DEPTH:
            todo += [((Path(workspace) / s.config).resolve(), depth + 1) for s in cfg.sub_agents]
    return out
