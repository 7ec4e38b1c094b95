"""A trial's limits at the gateway, read from the harness's agent.yaml files as data (their code
is never imported here): the request budget and the sampling settings the harness declared."""

from __future__ import annotations

from pathlib import Path

from ahe.confine.gateway import GatewayBudget
from ahe.llm.types import LLMSettings

# Middleware side calls and sub-agents share the trial's requests: a session may make up to this
# many times its own max_turns before the gateway refuses more.
REQUESTS_PER_TURN = 4
MAX_DEPTH = 3


def trial_budget(workspace: Path) -> GatewayBudget:
    from ahe.runtime.config import load_agent_config

    try:
        config = load_agent_config(Path(workspace) / "agent.yaml")
    except Exception:  # the worker reports a broken agent.yaml with its own message
        return GatewayBudget()
    return GatewayBudget(max_requests=REQUESTS_PER_TURN * config.max_turns,
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
