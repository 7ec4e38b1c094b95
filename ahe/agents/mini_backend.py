"""The `mini-swe-agent` backend: the harness is mini-swe-agent's config YAML (docs/backends.md).

A session runs in the same confined worker as AHE's own runtime (ahe/confine), with mini's
agent loop driving instead of AHE's Session (mini_session.py): its model is the host's gateway,
its shell the trial's sandbox. The config is validated there too, as mini validates it (its
own classes), so a custom agent or environment class in the harness is never imported here.
mini-swe-agent itself is the `mini` extra; AHE's process never imports it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from ahe.agents.ahe_backend import AheBackend
from ahe.agents.base import AgentRequest, Component
from ahe.agents.mini_config import mini_components, read_config, section
from ahe.confine.gateway import GatewayBudget
from ahe.confine.host import ConfineMode, ConfinedSessionSpec, load_problem_confined
from ahe.errors import ConfigError
from ahe.runtime import SessionResult

RUNNER = "ahe.agents.mini_session:run"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini's own end of a session
MISSING = "mini-swe-agent is not installed; install AHE's `mini` extra: pip install 'ahe[mini]'"


def mini_installed() -> bool:
    return importlib.util.find_spec("minisweagent") is not None


class MiniBackend(AheBackend):
    """AHE's worker pool and warm-up as they are (`AheBackend`: a jail holds nothing specific to
    its runner until it gets its job); components, load check, smoke policy and run are mini's."""

    name = "mini-swe-agent"
    summary = "mini-swe-agent's agent loop on its own config YAML (templates, limits, environment settings)"
    replayable = False  # replay foresight re-runs AHE middleware over recorded calls; mini has none

    def protected_keys(self, settings: dict[str, Any]) -> dict[str, list[str]]:
        # which config is read, and the model's sampling and class (the base model stays fixed)
        config = settings.get("config") if isinstance(settings.get("config"), str) else "mini.yaml"
        return {"harness.yaml": ["config"],
                config: ["model.model_kwargs", "model.model_name", "model.model_class"]}

    def components(self, harness: Path) -> list[Component]:
        return mini_components(Path(harness))

    def smoke_policy(self, harness: Path) -> dict[str, Any]:
        """One command, then mini's submit command: as a bash tool call for tool-call configs, and as
        a reply that both of mini's text formats parse (backtick block and XML tag) for text-based ones."""
        return mini_policy("mini-swe-agent smoke (MOCK)", [["echo AHE smoke check"], [SUBMIT]])

    async def load_problem(self, harness: Path, isolation: ConfineMode = "auto") -> str | None:
        if not mini_installed():
            return MISSING
        try:
            read_config(Path(harness))  # the file and its shape, as data, before a jail starts
        except ConfigError as exc:
            return str(exc)
        return await load_problem_confined(Path(harness), isolation, runner=RUNNER)

    async def warm(self, harness: Path, isolation: ConfineMode = "auto") -> Any:
        return await super().warm(harness, isolation) if mini_installed() else None

    async def run(self, request: AgentRequest) -> SessionResult:
        if not mini_installed():
            raise ConfigError(MISSING)
        worker = await self.worker_for(request)
        try:
            return await worker.run(ConfinedSessionSpec(
                instruction=request.instruction, trace_dir=request.trace_dir, wall_clock_sec=request.wall_clock_sec,
                working_directory=request.working_directory or "/app", prompt_variables=request.prompt_variables,
                session_id=request.session_id, state=request.state, min_turns=request.min_turns,
                budget=request.budget or mini_budget(request.harness), runner=RUNNER,
            ), request.client, request.sandbox)
        finally:
            await worker.close()  # nothing the harness started outlives its session


def mini_budget(harness: Path) -> GatewayBudget:
    """The gateway's limits from mini's own: its step_limit bounds the requests (a custom agent
    class that ignores it still cannot make more); 0 means no limit, as in mini."""
    try:
        agent = section(read_config(Path(harness)), "agent")
    except ConfigError:
        return GatewayBudget()
    steps = agent.get("step_limit")
    return GatewayBudget(max_requests=steps if isinstance(steps, int) and steps > 0 else None)


def text_action(command: str) -> str:
    """A reply mini's text-based parsing accepts with its default regex and with its XML one
    (each finds exactly one action in it)."""
    return (f"Running the next command.\n\n```mswea_bash_command\n{command}\n```\n\n"
            f"<mswea_bash_command>{command}</mswea_bash_command>\n")


def mini_policy(name: str, turns: list[list[str]], match: dict[str, Any] | None = None) -> dict[str, Any]:
    """A scripted MOCK policy in mini's formats: turn i runs `turns[i-1]` (one command per turn for
    text-based configs, each as a bash tool call for tool-call ones); `match` narrows every rule."""
    rules = []
    for i, commands in enumerate(turns, 1):
        m = {"turn": i, **(match or {})}
        rules.append({"match": {**m, "tools_include": "bash"},
                      "tool_calls": [{"name": "bash", "arguments": {"command": c}} for c in commands]})
        rules.append({"match": m, "reply": text_action(" && ".join(commands))})
    return {"name": name, "rules": rules, "default": {"reply": "MOCK: nothing more to do"}}
