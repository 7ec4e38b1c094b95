"""Replaying recorded steps through a harness, with the runtime's own machinery.

`ReplaySession` is a `Session` that never calls a model: each recorded model turn is fed to
the harness's middleware exactly as the runtime would (`before_model`, `wrap_model_call`,
`after_model`, then every tool call through `before_tool`, `wrap_tool_call`, argument
validation against the tool's `input_schema`, `after_tool`), through the session's public
step API (`load_middleware`, `run_hooks`, `wrap_calls`, `execute_tool_call`; docs/hooks.md),
so a hook's result is validated, applied and its exceptions recorded the same way as in a
live session. The tool itself is not run: it returns the recorded observation, unless
the session re-executes (`execute=True`, a real sandbox), when the real tool runs.

Replaying the harness before and after a change over the same recorded steps and comparing
what each would do (`differences`) isolates the change's effect from everything else.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any

from ahe.runtime.middleware import overrides
from ahe.runtime.results import ToolCallRequest
from ahe.runtime.session import Session, TurnFlags
from ahe.runtime.tools import Tool, ToolResult
from ahe.runtime.trace import EventLog
from ahe.runtime.workspace import LoadedAgent
from evolve_agent.replay.recorded import RecordedCall, RecordedTrial, RecordedTurn

_RECORDED: ContextVar[ToolResult | None] = ContextVar("ahe_replay_recorded", default=None)
_CALL: ContextVar[RecordedCall | None] = ContextVar("ahe_replay_call", default=None)
_RUNTIME_MARKS = ("denied", "denied_by")  # set by the runtime, not by the tool: replay decides them anew


async def _recorded_output(**_: Any) -> ToolResult:
    """The twin of every tool during replay: validation runs, then the recorded observation comes back."""
    out = _RECORDED.get()
    return out if out is not None else ToolResult(content="")


_VERDICTS: dict[tuple[str, str], str | None] = {}  # (schema, arguments) -> Tool.validate's answer


class _ReplayTool(Tool):
    """A tool twin: `Tool.call` as in a session (validation, rendering), the recorded output as result.

    Validation is the runtime's own `Tool.validate`; its answer is remembered per (schema,
    arguments), so the two sides of a change that share a schema validate each call once.
    """

    def validate(self, arguments: dict[str, Any]) -> str | None:
        rec = _CALL.get()
        args = rec.key if rec is not None and arguments == rec.arguments else _args(arguments)
        key = (self._schema_key, args)
        if key not in _VERDICTS:
            if len(_VERDICTS) > 200_000:
                _VERDICTS.clear()
            _VERDICTS[key] = super().validate(arguments)
        return _VERDICTS[key]

    def __post_init__(self) -> None:
        super().__post_init__()
        self._schema_key = json.dumps(self.description.input_schema, sort_keys=True) + "\0" + self.name


def replay_twin(agent: LoadedAgent) -> LoadedAgent:
    """The same agent whose tools keep their descriptions (schemas) but return recorded outputs."""
    tools = {name: _ReplayTool(description=t.description, function=_recorded_output, source=f"replay:{t.source}")
             for name, t in agent.tools.items()}
    return dataclasses.replace(agent, tools=tools)


class _Collector(EventLog):
    """Keeps the session's events in memory (replay writes no file)."""

    def __init__(self) -> None:
        super().__init__(None)
        self.items: list[tuple[str, dict[str, Any]]] = []

    def emit(self, type_: str, **data: Any) -> None:
        self.items.append((type_, data))


@dataclass
class CallEffect:
    name: str
    arguments: str  # after before_tool hooks, as canonical JSON
    content: str
    is_error: bool
    denied: str | None
    error_kind: str | None


@dataclass
class Effect:
    """What a harness does around one recorded step (or at session start)."""

    notes: list[str] = field(default_factory=list)
    stop: str | None = None
    replaced: bool = False
    model: list[str] = field(default_factory=list)  # how wrap_model_call altered the call
    force_continue: bool = False
    calls: list[CallEffect] = field(default_factory=list)
    errors: list[tuple[str, str, str]] = field(default_factory=list)  # (middleware, hook, error)


def _args(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)  # as RecordedCall.key


class ReplaySession(Session):
    """A session driven by a recorded trajectory instead of a model (see the module docstring)."""

    def __init__(self, agent: LoadedAgent, *, sandbox: Any = None, execute: bool = False, twin: bool = False) -> None:
        # `twin=True`: `agent` is already a `replay_twin` (built once per harness, not per trial)
        super().__init__(agent if execute or twin else replay_twin(agent), None, sandbox=sandbox)
        self.execute = execute
        self.events = _Collector()
        self.load_middleware()
        self._own: tuple[RecordedTrial, list[dict[str, Any]]] | None = None
        self._track = any(overrides(mw, h) for mw in self.middleware
                          for h in ("before_model", "after_model", "wrap_model_call", "after_tool", "before_tool"))

    def _effect(self, flags: TurnFlags, mark: int) -> Effect:
        eff = Effect(notes=[t for _, t in flags.notes], stop=flags.stop)
        for kind, data in self.events.items[mark:]:
            if kind == "middleware_error":
                eff.errors.append((str(data.get("middleware")), str(data.get("hook")), str(data.get("error"))))
            elif kind == "messages_replaced":
                eff.replaced = True
        return eff

    async def start(self, trial: RecordedTrial) -> Effect:
        """before_session on the recorded system prompt and instruction."""
        self.messages = [dict(m) for m in trial.messages[:2]]
        flags, mark = TurnFlags(), len(self.events.items)
        await self.run_hooks("before_session", flags=flags)
        return self._effect(flags, mark)

    async def step(self, trial: RecordedTrial, index: int) -> Effect:
        """One recorded model turn and its tool calls."""
        turn = trial.turns[index]
        if self._track:
            if self._own is None or self._own[0] is not trial:  # one private copy per trial: hooks may mutate
                self._own = (trial, [dict(m) for m in trial.messages])
            self.messages = self._own[1][:turn.n_messages]
        self.turn = index
        flags, mark = TurnFlags(), len(self.events.items)
        if index >= self.agent.config.max_turns:
            flags.stop = f"max_turns={self.agent.config.max_turns} reached"
            return self._effect(flags, mark)
        await self.run_hooks("before_model", flags=flags)
        if flags.stop:  # the session would end before this model call
            return self._effect(flags, mark)
        model_changes = await self._model(turn)
        self.turn = index + 1
        if self._track:
            self.messages = self._own[1][:turn.n_messages + 1]  # + the recorded reply
        await self.run_hooks("after_model", turn.response, flags=flags)
        calls: list[CallEffect] = []
        if not flags.stop and turn.calls:
            reqs = [ToolCallRequest(c.id, c.name, dict(c.arguments) if c.arguments is not None else None,
                                    c.raw_arguments, c.parse_error) for c in turn.calls]
            if len(reqs) == 1:  # the common case, without the cost of a task
                results = [await self._call(reqs[0], turn.calls[0], flags)]
            else:  # several calls of one turn run concurrently in a session
                results = await asyncio.gather(*(self._call(r, c, flags) for r, c in zip(reqs, turn.calls)))
            for req, res, rec in zip(reqs, results, turn.calls):
                args = rec.key if req.arguments == rec.arguments else _args(req.arguments)
                calls.append(CallEffect(req.name, args, res.content, res.is_error,
                                        res.content if res.metadata.get("denied") else None,
                                        res.metadata.get("error_kind")))
        eff = self._effect(flags, mark)
        eff.model, eff.calls = model_changes, calls
        eff.force_continue = flags.force_continue and index == len(trial.turns) - 1
        return eff

    async def _model(self, turn: RecordedTurn) -> list[str]:
        """wrap_model_call as an onion around the recorded reply; what the layers changed."""
        if not any(overrides(mw, "wrap_model_call") for mw in self.middleware):
            return []
        seen: dict[str, Any] = {}

        async def innermost(messages: list[dict[str, Any]]) -> Any:
            seen["messages"] = messages
            return turn.response

        sent = list(self.messages)
        out = await self.wrap_calls("wrap_model_call", innermost)(sent)
        changes = []
        if "messages" not in seen:
            changes.append("the model would not be called")
        elif seen["messages"] != self.messages:
            changes.append("the messages sent to the model would be rewritten")
        if out is not turn.response and getattr(out, "model_dump", None) and out.model_dump() != turn.response.model_dump():
            changes.append("the model's reply would be rewritten")
        return changes

    async def _call(self, req: ToolCallRequest, rec: RecordedCall, flags: TurnFlags) -> ToolResult:
        if self.execute:
            return await self.execute_tool_call(req, flags)
        meta = {k: v for k, v in rec.metadata.items() if k not in _RUNTIME_MARKS}
        token = _RECORDED.set(ToolResult(content=rec.content, is_error=rec.is_error, metadata=meta))
        token2 = _CALL.set(rec)
        try:
            return await self.execute_tool_call(req, flags)
        finally:
            _CALL.reset(token2)
            _RECORDED.reset(token)


def _short(text: str, n: int = 120) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _call_reasons(o: CallEffect | None, n: CallEffect | None, *, executed: bool) -> list[str]:
    if n is None:
        return [f"call {o.name} would not be made" if o else "a call would not be made"]
    if o is None:
        return [f"call {n.name} would be made"]
    if n.denied is not None and o.denied is None:
        return [f"call {n.name} denied: {_short(n.denied)}"]
    if o.denied is not None and n.denied is None:
        return [f"call {n.name} no longer denied (what it would return is unknown)"]
    if n.error_kind == "invalid_arguments" and o.error_kind != "invalid_arguments":
        return [f"arguments of {n.name} rejected by the new schema: {_short(n.content)}"]
    if n.error_kind == "unknown_tool" and o.error_kind != "unknown_tool":
        return [f"tool {n.name} no longer exists"]
    if o.error_kind == "invalid_arguments" and n.error_kind != "invalid_arguments":
        return [f"arguments of {n.name} now accepted (what it would return is unknown)"]
    out = []
    if n.arguments != o.arguments:
        out.append(f"input of {n.name} rewritten to {_short(n.arguments, 100)}")
    if n.content != o.content or n.is_error != o.is_error:
        what = "differs when re-executed" if executed else "rewritten"
        out.append(f"output of {n.name} {what}: {_short(n.content)}")
    return out


def differences(old: Effect, new: Effect, *, executed: bool = False) -> list[str]:
    """Why the step would go differently under the new harness; empty when it would not."""
    reasons: list[str] = []
    if new.stop and new.stop != old.stop:
        reasons.append(f"session stopped: {_short(new.stop)}")
    elif old.stop and not new.stop:
        reasons.append("session no longer stopped here (what follows is unknown)")
    for o, n in zip_longest(old.calls, new.calls):
        reasons += _call_reasons(o, n, executed=executed)
    added = [t for t in new.notes if t not in old.notes]
    reasons += [f"note injected: {_short(t)}" for t in added]
    if any(t not in new.notes for t in old.notes):
        reasons.append("a note would no longer be injected")
    if new.replaced != old.replaced:
        reasons.append("the conversation would be replaced by a middleware" if new.replaced else
                       "the conversation would no longer be replaced")
    reasons += [m for m in new.model if m not in old.model]
    if new.force_continue != old.force_continue:
        reasons.append("the session would go on instead of ending" if new.force_continue else
                       "the session would end here instead of going on")
    return reasons
