"""Middleware: hooks around the session, every model call and every tool call.

Order: `before_*` hooks run in list order, `after_*` hooks in reverse, `wrap_*` hooks as an
onion (the first middleware is the outermost). A hook returns None (no change) or a
`HookResult`. A hook that raises is logged and recorded as a `middleware_error` event; the
session goes on as if the hook had returned None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:  # pragma: no cover
    from ahe.llm.types import ModelResponse
    from ahe.runtime.results import ToolCallRequest
    from ahe.runtime.view import SessionView
    from ahe.runtime.tools import ToolResult

FRAMEWORK_NOTE_PREFIX = "[framework note] "


class HookResult(BaseModel):
    """What a hook asks the runtime to do. Unset fields mean "no change".

    Fields and the hooks that honour them:
    - `replace_messages`: the whole conversation is replaced (before_session, before_model,
      after_model, after_tool). Use it to compact or redact history.
    - `add_message`: a user-role message, marked as a framework note, is appended
      (before_session, before_model, after_model, after_tool).
    - `replace_tool_input`: the tool is called with these arguments instead (before_tool).
    - `replace_tool_output`: the model sees this text instead of the tool's output
      (after_tool).
    - `deny`: the tool call is not executed; the model sees this message as an error
      result (before_tool).
    - `force_continue`: when the session would end now (no tool call, or a stop tool), it
      runs another turn instead (after_model, after_tool); combine with `add_message` to
      say why.
    - `stop`: end the session now with this reason (any hook but after_session).
    """

    model_config = ConfigDict(extra="forbid")

    replace_messages: list[dict[str, Any]] | None = None
    add_message: str | None = None
    replace_tool_input: dict[str, Any] | None = None
    replace_tool_output: str | None = None
    deny: str | None = None
    force_continue: bool = False
    stop: str | None = None


ALLOWED_FIELDS: dict[str, frozenset[str]] = {
    "before_session": frozenset({"replace_messages", "add_message", "stop"}),
    "after_session": frozenset(),
    "before_model": frozenset({"replace_messages", "add_message", "stop"}),
    "after_model": frozenset({"replace_messages", "add_message", "force_continue", "stop"}),
    "before_tool": frozenset({"replace_tool_input", "deny", "stop"}),
    "after_tool": frozenset({"replace_messages", "add_message", "replace_tool_output", "force_continue", "stop"}),
}

ModelCall = Callable[[list[dict[str, Any]]], Awaitable["ModelResponse"]]
ToolCallNext = Callable[["ToolCallRequest"], Awaitable["ToolResult"]]


class Middleware:
    """Base class for workspace middleware. Override any hook; each may be sync or async.

    `params` from agent.yaml arrive as keyword arguments to the constructor and are kept in
    `self.params`. `ctx` (a `SessionView`) gives read access to the conversation, the turn,
    usage, the per-session `state` dict, the sandbox, and the model `client` for side calls.
    """

    def __init__(self, **params: Any) -> None:
        self.params = params

    def before_session(self, ctx: "SessionView") -> HookResult | None:
        return None

    def after_session(self, ctx: "SessionView", result: Any) -> None:
        return None

    def before_model(self, ctx: "SessionView", messages: list[dict[str, Any]]) -> HookResult | None:
        return None

    def after_model(self, ctx: "SessionView", response: "ModelResponse") -> HookResult | None:
        return None

    def before_tool(self, ctx: "SessionView", call: "ToolCallRequest") -> HookResult | None:
        return None

    def after_tool(self, ctx: "SessionView", call: "ToolCallRequest", result: "ToolResult") -> HookResult | None:
        return None

    async def wrap_model_call(
        self, ctx: "SessionView", messages: list[dict[str, Any]], call_next: ModelCall
    ) -> "ModelResponse":
        return await call_next(messages)

    async def wrap_tool_call(
        self, ctx: "SessionView", call: "ToolCallRequest", call_next: ToolCallNext
    ) -> "ToolResult":
        return await call_next(call)


HOOKS = (
    "before_session",
    "after_session",
    "before_model",
    "after_model",
    "before_tool",
    "after_tool",
    "wrap_model_call",
    "wrap_tool_call",
)


def overrides(mw: Middleware, hook: str) -> bool:
    """True when the middleware's class defines its own version of `hook`."""
    return getattr(type(mw), hook) is not getattr(Middleware, hook)
