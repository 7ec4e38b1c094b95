"""The `ahe` backend: AHE's own runtime (agent.yaml, tools/, middleware/, skills, sub-agents).

Its sessions run in a confined worker per trial (ahe/confine): the harness's code is imported
there, never in AHE's process. Spare workers are launched ahead for the sessions an executor
announces (`expect`), so a trial's session does not wait for the worker's imports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ahe.agents.base import AgentRequest, BackendBase, Component
from ahe.confine.host import ConfineMode, ConfinedSessionSpec, load_problem_confined, worker_mode
from ahe.runtime import SessionResult


class AheBackend(BackendBase):
    name = "ahe"
    summary = "AHE's own runtime: agent.yaml, system prompt, tools, middleware, skills, sub-agents, memory"
    replayable = True

    def __init__(self) -> None:
        self._pool = None

    def pool(self):  # ahe.confine.pool.WorkerPool, made on first use
        if self._pool is None:
            from ahe.confine.pool import WorkerPool

            self._pool = WorkerPool()
        return self._pool

    def smoke_policy(self, harness: Path) -> dict[str, Any]:
        # never used: the gate plans a call to every tool, skill and sub-agent itself (evolve_agent/smoke.py)
        return {"name": "ahe smoke (MOCK)", "rules": [], "default": {"reply": "MOCK smoke session: done"}}

    def components(self, harness: Path) -> list[Component]:
        return ahe_components(Path(harness))

    async def load_problem(self, harness: Path, isolation: ConfineMode = "auto") -> str | None:
        return await load_problem_confined(Path(harness), isolation)

    async def run(self, request: AgentRequest) -> SessionResult:
        from ahe.confine.budget import trial_budget

        worker = await self.worker_for(request)
        try:
            return await worker.run(ConfinedSessionSpec(
                instruction=request.instruction, trace_dir=request.trace_dir, wall_clock_sec=request.wall_clock_sec,
                working_directory=request.working_directory, prompt_variables=request.prompt_variables,
                session_id=request.session_id, state=request.state, min_turns=request.min_turns,
                budget=request.budget or trial_budget(request.harness, request.model_requests_per_turn),
            ), request.client, request.sandbox)
        finally:
            await worker.close()  # nothing the harness started outlives its session

    async def worker_for(self, request: AgentRequest) -> Any:
        """The session's worker: the warmed one when it runs where the trial's sandbox wants it (a
        container of its own beside a docker sandbox, else a bwrap jail), else a new one."""
        mode = worker_mode(request.isolation, request.sandbox)
        if request.warm is not None and request.warm.mode == mode:
            return request.warm
        if request.warm is not None:
            await request.warm.close()
        return await self.pool().acquire(request.harness, mode)

    async def warm(self, harness: Path, isolation: ConfineMode = "auto") -> Any:
        """A launched worker (its imports overlap the sandbox's start and the task's setup)."""
        return await self.pool().acquire(harness, isolation)

    async def discard(self, warmed: Any) -> None:
        if warmed is not None:
            await warmed.close()

    def expect(self, sessions: int) -> None:
        self.pool().expect(sessions)

    async def drain(self) -> None:
        if self._pool is not None:
            await self._pool.drain()

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None


def ahe_components(harness: Path) -> list[Component]:
    """The component map of an agent.yaml harness, read as data (its code is never imported here)."""
    from ahe.runtime.config import load_agent_config

    out = [Component(path="agent.yaml", component="middleware", note="the agent's wiring (tools, middleware, "
                     "skills, sub-agents, limits; its llm block is protected): name the class of what an edit wires in")]
    try:
        cfg = load_agent_config(harness / "agent.yaml")
    except Exception:  # a broken agent.yaml is the load check's to report
        return out
    out.append(Component(path=cfg.system_prompt, component="system_prompt"))
    if cfg.memory:
        out.append(Component(path=cfg.memory, component="long_term_memory"))
    for tool in cfg.tools:
        out.append(Component(path=tool.description, component="tool_description", note=f"tool {tool.name}"))
        module = tool.binding.split(":", 1)[0]
        out.append(Component(path=module.replace(".", "/") + ".py", component="tool_implementation",
                             note=f"tool {tool.name}"))
    for mw in cfg.middleware:
        module = mw.binding.split(":", 1)[0]
        out.append(Component(path=module.replace(".", "/") + ".py", component="middleware"))
    out += [Component(path=skill, component="skill") for skill in cfg.skills]
    out += [Component(path=str(Path(sub.config).parent) + "/", component="sub_agent", note=f"sub-agent {sub.name}")
            for sub in cfg.sub_agents]
    return out
