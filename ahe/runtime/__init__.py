"""The harness runtime: loads a workspace and runs the agent loop (DESIGN.md §3).

Public API for workspace code: `Middleware`, `HookResult`, `ToolResult`, `SessionView`.
For code that drives a session's steps itself: `Session`'s step API and `TurnFlags` (docs/hooks.md).
"""

from ahe.runtime.middleware import HookResult, Middleware
from ahe.runtime.session import Session, SessionResult, SessionView, StopReason, ToolCallRequest, TurnFlags
from ahe.runtime.tools import ToolResult
from ahe.runtime.workspace import LoadedAgent, load_agent

__all__ = [
    "HookResult",
    "LoadedAgent",
    "Middleware",
    "Session",
    "SessionResult",
    "SessionView",
    "StopReason",
    "ToolCallRequest",
    "ToolResult",
    "TurnFlags",
    "load_agent",
]
