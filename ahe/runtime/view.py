"""The read-only window on a running session that tools (`session`) and hooks (`ctx`) get."""

from __future__ import annotations

from typing import Any, Protocol

from ahe.llm.types import ModelClient, Usage
from ahe.runtime.tools import ToolResult


class RunningSession(Protocol):
    """What the view reads of its session (`ahe.runtime.session.Session` is one): a protocol here,
    so the session imports this module and never the other way round."""

    messages: list[dict[str, Any]]
    turn: int
    usage: Usage
    state: dict[str, Any]
    sandbox: Any
    client: ModelClient
    agent: Any  # LoadedAgent: its `name`
    session_id: str
    events: Any  # EventLog: its `emit`

    async def run_sub_agent(self, name: str, message: str) -> ToolResult: ...


class SessionView:
    """Read-only window on a running session, injected into tools (`session`) and hooks."""

    def __init__(self, session: RunningSession) -> None:
        self._s = session

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self._s.messages)

    @property
    def turn(self) -> int:
        return self._s.turn

    @property
    def usage(self) -> Usage:
        return self._s.usage

    @property
    def state(self) -> dict[str, Any]:
        return self._s.state

    @property
    def sandbox(self) -> Any:
        return self._s.sandbox

    @property
    def client(self) -> ModelClient:
        return self._s.client

    @property
    def agent_name(self) -> str:
        return self._s.agent.name

    @property
    def session_id(self) -> str:
        return self._s.session_id

    def note(self, kind: str, **data: Any) -> None:
        """Record an event of the middleware's or tool's own in events.jsonl."""
        self._s.events.emit(kind, **data)

    async def run_sub_agent(self, name: str, message: str) -> ToolResult:
        return await self._s.run_sub_agent(name, message)
