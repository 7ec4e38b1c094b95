"""The two shapes of a failed tool call of the evolve agent: an error it can fix, a refusal it is told of."""

from __future__ import annotations

from typing import Any

from ahe.runtime.tools import ToolResult
from evolve_agent.context import EvolveContext


def error(text: str) -> ToolResult:
    """A mistake the agent can correct (bad arguments, nothing to record)."""
    return ToolResult(content=text, is_error=True)


def refused(ctx: EvolveContext, session: Any, tool: str, reason: str, **where: Any) -> ToolResult:
    """A confinement or protection refusal: recorded in the manifest and the session's events."""
    ctx.refuse(session, tool, reason, **where)
    return ToolResult(content=f"refused: {reason}", is_error=True, metadata={"refused": True})
