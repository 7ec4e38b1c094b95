"""The agent-backend seam: what one agent session of a trial is given, and what it gives back.

A backend turns an `AgentRequest` (the harness folder at the evaluated commit, the task's
instruction, the trial's sandbox, the role's model client and limits) into one session and
returns a `SessionResult` (stop reason, turns, the trajectory the debugger reads, an error
class). Tokens and cost are never the backend's word: every backend reaches the model only
through a `ModelGateway` (ahe/confine), whose meter is the session's usage.

The verifier, results, attribution, rollback, audit, report and transfer do not know which
backend ran: they see the same trial folder. `ahe` (AHE's own runtime) is one backend;
mini-swe-agent and command-line agents are others (docs/backends.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from ahe.confine.gateway import GatewayBudget
from ahe.confine.host import ConfineMode
from ahe.llm.types import ModelClient
from ahe.runtime import SessionResult

# The harness's component classes (DESIGN.md §5): what an edit's manifest says it changed.
ComponentClass = Literal[
    "system_prompt",
    "tool_description",
    "tool_implementation",
    "middleware",
    "skill",
    "sub_agent",
    "long_term_memory",
]


class Component(BaseModel):
    """One part of a harness folder and the class an edit to it belongs to."""

    model_config = ConfigDict(extra="forbid")

    path: str  # relative to the harness folder; a glob (`tools/*.py`) or a folder (`skills/`)
    component: ComponentClass
    note: str = ""  # what the part is, in the backend's own words ("mini-swe-agent's system_template")


@dataclass
class AgentRequest:
    """One agent session of a trial (or of the gate's smoke check), as a backend receives it."""

    harness: Path  # the harness folder at the evaluated commit; the agent sees it read-only
    instruction: str
    trace_dir: Path  # the trial folder: trajectory.json, conversation.jsonl, events.jsonl go here
    client: ModelClient  # the role's endpoint, host side: reach it through a ModelGateway only
    sandbox: Any = None  # the trial's started Sandbox (None: a session without one)
    isolation: ConfineMode = "auto"
    wall_clock_sec: float | None = None
    budget: GatewayBudget | None = None  # None: the backend's own, from its max turns × model_requests_per_turn
    model_requests_per_turn: int = 4  # the user's cap on requests per turn of the agent (config)
    working_directory: str | None = None
    prompt_variables: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    min_turns: int | None = None  # the gate's smoke plan needs this many turns at least
    warm: Any = None  # what the backend's `warm` returned for this session (None: nothing warmed)


@runtime_checkable
class AgentBackend(Protocol):
    """How one kind of agent runs a session. One instance per executor (it may keep warm workers)."""

    name: str
    summary: str
    replayable: bool  # can replay foresight re-run recorded tool calls against this backend's harness

    def components(self, harness: Path) -> list[Component]:
        """Which file of the harness is which component class (the evolve agent's map)."""
        ...

    async def load_problem(self, harness: Path, isolation: ConfineMode = "auto") -> str | None:
        """None when the harness loads as this backend will load it (confined); else one sentence."""
        ...

    async def run(self, request: AgentRequest) -> SessionResult:
        """Run one session; never raises for the agent's own failures (they are a stop reason)."""
        ...

    def protected_keys(self, settings: dict[str, Any]) -> dict[str, list[str]]:
        """What an evolve edit may not change, given harness.yaml's own keys (`settings`): file →
        dotted key paths (the base model's sampling, the request budget), like agent.yaml's llm block."""
        ...

    def smoke_policy(self, harness: Path) -> dict[str, Any]:
        """A scripted MOCK policy (ahe.testing) that drives one short session of this harness to
        its end: the gate's smoke check runs it (`ahe`'s own gate plans every tool call instead)."""
        ...

    async def warm(self, harness: Path, isolation: ConfineMode = "auto") -> Any:
        """Start what can start before the trial's sandbox is up (a jail and its imports); the
        result comes back as `request.warm`, or to `discard` when the trial fails before `run`."""
        ...

    async def discard(self, warmed: Any) -> None:
        """Release what `warm` started for a session that will not run."""
        ...

    def expect(self, sessions: int) -> None:
        """`sessions` more will start later: a backend may warm workers for them (or ignore it)."""
        ...

    async def drain(self) -> None:
        """A batch is over: let go of anything warmed for it."""
        ...

    async def aclose(self) -> None:
        """The executor is done: release everything."""
        ...


class BackendBase:
    """No-op `warm`/`discard`/`expect`/`drain`/`aclose` and `replayable = False`, for backends
    that need nothing more."""

    name = "?"
    summary = ""
    replayable = False

    def protected_keys(self, settings: dict[str, Any]) -> dict[str, list[str]]:
        return {}

    def smoke_policy(self, harness: Path) -> dict[str, Any]:
        return {"name": f"{self.name} smoke (MOCK)", "rules": [], "default": {"reply": "MOCK smoke session: done"}}

    async def warm(self, harness: Path, isolation: ConfineMode = "auto") -> Any:
        return None

    async def discard(self, warmed: Any) -> None:
        return None

    def expect(self, sessions: int) -> None:
        return None

    async def drain(self) -> None:
        return None

    async def aclose(self) -> None:
        return None
