"""The agent loop: one session of one agent on one instruction.

A session alternates model calls and tool calls until it ends on a stop tool, a reply with
no tool call, `max_turns`, the context budget, a middleware stop, the wall-clock limit, or
an infrastructure error (model endpoint or sandbox — recorded apart from the agent's own
failures). Middleware hooks wrap every step; everything is traced as it happens.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from pydantic import ValidationError

from ahe.errors import ContextLengthError, InfrastructureError
from ahe.llm.types import ModelClient, ModelResponse, Usage
from ahe.runtime.middleware import ALLOWED_FIELDS, FRAMEWORK_NOTE_PREFIX, HookResult, Middleware, overrides
from ahe.runtime.results import SessionResult, StopReason, ToolCallRequest
from ahe.runtime.tools import ToolResult, short_error
from ahe.runtime.trace import EventLog, TrajectoryWriter, agent_step
from ahe.runtime.view import SessionView
from ahe.runtime.workspace import LoadedAgent

log = logging.getLogger(__name__)
MAX_SUB_AGENT_DEPTH = 3


class _Stop(Exception):
    def __init__(self, reason: StopReason, detail: str | None = None) -> None:
        self.reason, self.detail = reason, detail


@dataclass
class TurnFlags:
    """What the hooks of one step asked for: framework notes to add, another turn, a stop.

    Part of the step API (`run_hooks`, `execute_tool_call`; docs/hooks.md): the caller makes
    one per step and reads it afterwards.
    """

    force_continue: bool = False
    stop: str | None = None
    notes: list[tuple[str, str]] = field(default_factory=list)  # (middleware, text)


class Session:
    def __init__(
        self,
        agent: LoadedAgent,
        client: ModelClient,
        *,
        sandbox: Any = None,
        trace_dir: Path | None = None,
        wall_clock_sec: float | None = None,
        working_directory: str = "/app",
        prompt_variables: dict[str, Any] | None = None,
        session_id: str | None = None,
        depth: int = 0,
        state: dict[str, Any] | None = None,
    ) -> None:
        self.agent = agent
        self.client = client
        self.sandbox = sandbox
        self.trace_dir = Path(trace_dir) if trace_dir else None
        self.wall_clock_sec = wall_clock_sec
        self.working_directory = working_directory
        self.prompt_variables = prompt_variables or {}
        self.session_id = session_id or uuid.uuid4().hex[:12]
        self.depth = depth
        self.messages: list[dict[str, Any]] = []
        # Shared by tools and middleware; callers may seed it (e.g. the paths a tool may touch).
        self.state: dict[str, Any] = dict(state or {})
        self.turn = 0
        self.usage = Usage()
        self.view = SessionView(self)
        self.events = EventLog(None)
        self.trace = TrajectoryWriter(None, session_id=self.session_id, agent={})
        self.middleware: list[Middleware] = []  # this session's instances (`load_middleware`)
        self._counts = {"tool_calls": 0, "tool_errors": 0, "middleware_errors": 0}
        self._known_tokens = 0  # prompt+completion tokens of the last model call
        self._chars_since = 0  # characters appended since that call
        self._sub_runs = 0
        self._deadline: float | None = None

    # ------------------------------------------------------------------ public
    async def run(self, instruction: str) -> SessionResult:
        t0 = time.monotonic()
        if self.wall_clock_sec:
            self._deadline = t0 + self.wall_clock_sec
        traj_path = events_path = None
        if self.trace_dir is not None:
            traj_path, events_path = self.trace_dir / "trajectory.json", self.trace_dir / "events.jsonl"
        agent_info = {"name": self.agent.name, "version": "ahe", "model_name": getattr(self.client, "model", None)}
        self.trace = TrajectoryWriter(traj_path, session_id=self.session_id, agent=agent_info)
        self.events = EventLog(events_path)
        self.events.emit("session_start", session_id=self.session_id, agent=self.agent.name, depth=self.depth)
        result = SessionResult(session_id=self.session_id, agent=self.agent.name, stop_reason=StopReason.no_tool_call)
        try:
            try:
                async with asyncio.timeout(self.wall_clock_sec) as tm:
                    final = await self._loop(instruction)
                result.stop_reason, result.final_answer = final
            except _Stop as stop:
                result.stop_reason, result.detail = stop.reason, stop.detail
            except TimeoutError:
                if self.wall_clock_sec and tm.expired():
                    result.stop_reason = StopReason.wall_clock
                    result.detail = f"wall-clock limit of {self.wall_clock_sec:g}s reached"
                else:
                    raise
            except ContextLengthError as exc:
                result.stop_reason, result.detail = StopReason.context_budget, str(exc)
            except InfrastructureError as exc:
                result.stop_reason, result.detail = StopReason.infra_error, str(exc)
                result.infra_error_kind = exc.kind
        except asyncio.CancelledError:
            result.stop_reason, result.detail = StopReason.cancelled, "session cancelled"
            self._finish(result, t0, traj_path, events_path)
            raise
        self._finish(result, t0, traj_path, events_path)
        await self.run_hooks("after_session", result, flags=TurnFlags())
        self.events.close()
        return result

    # ------------------------------------------------------------------ step API (docs/hooks.md)
    # What `run` is made of, for callers that drive the steps themselves (replay foresight feeds
    # recorded model turns through a harness's middleware, evolve_agent/replay).
    def load_middleware(self) -> list[Middleware]:
        """Fresh instances of agent.yaml's middleware for this session (`run` makes them as it starts)."""
        self.middleware = self.agent.make_middleware()
        return self.middleware

    async def run_hooks(self, hook: str, *args: Any, flags: TurnFlags) -> None:
        """Run `hook` of every middleware that defines it, in the runtime's order, as `run` does.

        `before_*` go in list order, `after_*` in reverse. Each result is validated and applied:
        `replace_messages` at once, notes, `force_continue` and `stop` into `flags`. A failing
        hook becomes a `middleware_error` event. `before_model` hooks each get a fresh copy of
        the messages (pass no arguments); `before_tool` / `after_tool` run in `execute_tool_call`.
        """
        order = list(reversed(self.middleware)) if hook.startswith("after_") else list(self.middleware)
        for mw in order:
            if overrides(mw, hook):
                hook_args = (list(self.messages),) if hook == "before_model" else args
                self._apply(mw, await self._hook(mw, hook, *hook_args), flags)

    def wrap_calls(self, hook: str, innermost: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        """`innermost` inside every middleware's `hook` (`wrap_model_call` or `wrap_tool_call`), first = outermost.

        A layer that raises is recorded as a `middleware_error`, and the inner call still happens exactly once.
        """
        call = innermost
        for mw in reversed(self.middleware):
            if overrides(mw, hook):
                call = self._wrap(mw, hook, call)
        return call

    async def execute_tool_call(self, call: ToolCallRequest, flags: TurnFlags) -> ToolResult:
        """One tool call as the loop makes it; the result is not appended to the conversation.

        Malformed arguments and unknown tools become error results; then `before_tool` (input
        replaced, call denied, stop), `wrap_tool_call` around the tool (arguments validated
        against its schema), `after_tool` (output replaced, notes and flags), a `tool_call` event.
        """
        t0 = time.monotonic()
        result = self._refused_call(call)
        if result is None:
            result = await self._before_tool(call, flags)
        if result is None:
            result = await self._dispatch(call)
        for mw in reversed(self.middleware):
            if overrides(mw, "after_tool"):
                hr = await self._hook(mw, "after_tool", call, result)
                if hr is not None and hr.replace_tool_output is not None:
                    result = result.model_copy(update={"content": hr.replace_tool_output})
                self._apply(mw, hr, flags, skip=("replace_tool_output",))
        self.events.emit(
            "tool_call",
            turn=self.turn,
            id=call.id,
            tool=call.name,
            duration_sec=round(time.monotonic() - t0, 4),
            is_error=result.is_error,
        )
        return result

    # ------------------------------------------------------------------ loop
    async def _loop(self, instruction: str) -> tuple[StopReason, str | None]:
        tool_schemas = await self._open(instruction)
        while True:
            await self._before_model_call()
            response = await self._model_turn(tool_schemas)
            flags = TurnFlags()
            await self.run_hooks("after_model", response, flags=flags)
            if flags.stop or not response.tool_calls:
                self._flush_notes(flags)  # raises _Stop on a stop
                if flags.force_continue:
                    continue
                return StopReason.no_tool_call, response.content
            calls, results = await self._tool_turn(response, flags)
            self._flush_notes(flags)  # raises _Stop on a stop
            answer = self._stop_tool_answer(calls, results, flags)
            if answer is not None:
                return StopReason.stop_tool, answer

    async def _open(self, instruction: str) -> list[dict[str, Any]] | None:
        """System prompt and instruction in place, fresh middleware, before_session hooks; the tools' schemas."""
        system_prompt = self.agent.render_system_prompt(
            working_directory=self.working_directory, extra=self.prompt_variables
        )
        self.load_middleware()
        self._append({"role": "system", "content": system_prompt}, source="system")
        self._append({"role": "user", "content": instruction}, source="user")
        tool_schemas = [t.openai_schema() for t in self.agent.tools.values()] or None
        flags = TurnFlags()
        await self.run_hooks("before_session", flags=flags)
        self._flush_notes(flags)
        return tool_schemas

    async def _before_model_call(self) -> None:
        """The turn limit, before_model hooks, then the context budget (each may raise _Stop)."""
        if self.turn >= self.agent.config.max_turns:
            raise _Stop(StopReason.max_turns, f"max_turns={self.agent.config.max_turns} reached")
        flags = TurnFlags()
        await self.run_hooks("before_model", flags=flags)
        self._flush_notes(flags)
        estimate = self._estimated_context_tokens()
        if estimate > self.agent.config.max_context_tokens:
            raise _Stop(
                StopReason.context_budget,
                f"context of ~{estimate} tokens exceeds max_context_tokens={self.agent.config.max_context_tokens}",
            )

    async def _model_turn(self, tool_schemas: list[dict[str, Any]] | None) -> ModelResponse:
        """One model call: counted, its reply appended to the conversation and traced."""
        response = await self._call_model(tool_schemas)
        self.turn += 1
        self.usage = self.usage.add(response.usage)
        self._known_tokens = response.usage.prompt_tokens + response.usage.completion_tokens
        self._chars_since = 0
        self.messages.append(response.assistant_message())
        self._trace_agent_step(response)
        return response

    async def _tool_turn(self, response: ModelResponse, flags: TurnFlags) -> tuple[list[ToolCallRequest], list[ToolResult]]:
        """Every tool call of the reply, concurrently; results appended in call order, traced as one observation."""
        calls = [
            ToolCallRequest(tc.id, tc.name, tc.arguments, tc.raw_arguments, tc.parse_error)
            for tc in response.tool_calls
        ]
        outcomes = await asyncio.gather(*(self.execute_tool_call(c, flags) for c in calls), return_exceptions=True)
        for out in outcomes:
            if isinstance(out, BaseException):
                raise out
        results: list[ToolResult] = list(outcomes)  # type: ignore[arg-type]
        observation = [self._record_result(call, res) for call, res in zip(calls, results)]
        self.trace.update_last_step(observation={"results": observation})
        return calls, results

    def _record_result(self, call: ToolCallRequest, res: ToolResult) -> dict[str, Any]:
        """Count the result, append it to the conversation; its item of the step's observation."""
        self._count_tool(res)
        self._append_raw({"role": "tool", "tool_call_id": call.id, "content": res.content})
        item: dict[str, Any] = {
            "source_call_id": call.id,
            "content": res.content,
            "extra": {"tool": call.name, "is_error": res.is_error, **res.metadata},
        }
        if "subagent_trajectory_ref" in res.metadata:
            item["subagent_trajectory_ref"] = item["extra"].pop("subagent_trajectory_ref")
        return item

    def _stop_tool_answer(self, calls: list[ToolCallRequest], results: list[ToolResult], flags: TurnFlags) -> str | None:
        """The final answer when a stop tool ran (not denied) and no hook forces another turn; else None."""
        if flags.force_continue:
            return None
        stop_tools = set(self.agent.config.stop_tools)
        for call, res in zip(calls, results):
            if call.name in stop_tools and not res.metadata.get("denied"):
                return (call.arguments or {}).get("message") or (call.arguments or {}).get("answer") or res.content
        return None

    # ------------------------------------------------------------------ model
    async def _call_model(self, tool_schemas: list[dict[str, Any]] | None) -> ModelResponse:
        settings = self.agent.config.llm

        async def innermost(messages: list[dict[str, Any]]) -> ModelResponse:
            t0 = time.monotonic()
            resp = await self.client.complete(messages, tools=tool_schemas, settings=settings, on_event=self._on_client_event)
            self.events.emit(
                "model_call",
                turn=self.turn + 1,
                latency_sec=round(resp.latency_sec or time.monotonic() - t0, 4),
                attempts=resp.attempts,
                usage=resp.usage.model_dump(exclude_none=True),
                tool_calls=[tc.name for tc in resp.tool_calls],
            )
            return resp

        return await self.wrap_calls("wrap_model_call", innermost)(list(self.messages))

    def _wrap(self, mw: Middleware, hook: str, inner: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        """One layer of the onion. If the hook raises, the call still happens exactly once."""

        async def layer(arg: Any) -> Any:
            box: dict[str, Any] = {}

            async def call_next(a: Any) -> Any:
                box["result"] = await inner(a)
                return box["result"]

            try:
                out = getattr(mw, hook)(self.view, arg, call_next)
                if inspect.isawaitable(out):
                    out = await out
                return out
            except (InfrastructureError, asyncio.CancelledError):
                raise
            except Exception as exc:
                self._middleware_error(mw, hook, exc)
                return box["result"] if "result" in box else await inner(arg)

        return layer

    def _on_client_event(self, kind: str, data: dict[str, Any]) -> None:
        self.events.emit(kind, **data)

    # ------------------------------------------------------------------ tools
    def _refused_call(self, call: ToolCallRequest) -> ToolResult | None:
        """The error result of a call whose arguments did not parse or whose tool does not exist."""
        if call.parse_error is not None or call.arguments is None:
            return ToolResult(
                content=f"could not parse the arguments of {call.name}: {call.parse_error or 'not a JSON object'} — send valid JSON",
                is_error=True,
                metadata={"error_kind": "malformed_arguments"},
            )
        if call.name not in self.agent.tools:
            return ToolResult(
                content=f"unknown tool {call.name!r}; available tools: {', '.join(self.agent.tools)}",
                is_error=True,
                metadata={"error_kind": "unknown_tool"},
            )
        return None

    async def _before_tool(self, call: ToolCallRequest, flags: TurnFlags) -> ToolResult | None:
        """before_tool hooks in list order: the input may be replaced; a stop or a denial is the call's result."""
        for mw in self.middleware:
            if not overrides(mw, "before_tool"):
                continue
            hr = await self._hook(mw, "before_tool", call)
            if hr is None:
                continue
            if hr.replace_tool_input is not None:
                call.arguments = dict(hr.replace_tool_input)
                self.events.emit("tool_input_replaced", middleware=type(mw).__name__, tool=call.name, id=call.id)
            if hr.stop:
                flags.stop = flags.stop or hr.stop
                return ToolResult(content=f"not run: the session is stopping ({hr.stop})", is_error=True, metadata={"denied": True})
            if hr.deny is not None:
                return ToolResult(content=hr.deny, is_error=True, metadata={"denied": True, "denied_by": type(mw).__name__})
        return None

    async def _dispatch(self, call: ToolCallRequest) -> ToolResult:
        tool = self.agent.tools[call.name]
        injections = {"sandbox": self.sandbox, "state": self.state, "session": self.view}

        async def innermost(c: ToolCallRequest) -> ToolResult:
            return await tool.call(c.arguments or {}, injections)

        out = await self.wrap_calls("wrap_tool_call", innermost)(call)
        return out if isinstance(out, ToolResult) else ToolResult(content=str(out))

    def _count_tool(self, res: ToolResult) -> None:
        self._counts["tool_calls"] += 1
        if res.is_error:
            self._counts["tool_errors"] += 1

    # ------------------------------------------------------------------ hooks
    async def _hook(self, mw: Middleware, hook: str, *args: Any) -> HookResult | None:
        try:
            out = getattr(mw, hook)(self.view, *args)
            if inspect.isawaitable(out):
                out = await out
        except (InfrastructureError, asyncio.CancelledError):
            raise
        except Exception as exc:
            self._middleware_error(mw, hook, exc)
            return None
        if out is None or hook == "after_session":
            return None
        if isinstance(out, dict):
            try:
                out = HookResult.model_validate(out)
            except ValidationError as exc:
                self._middleware_error(mw, hook, exc)
                return None
        if not isinstance(out, HookResult):
            self._middleware_error(mw, hook, TypeError(f"returned {type(out).__name__}; return None or a HookResult"))
            return None
        bad = [f for f in out.model_fields_set if f not in ALLOWED_FIELDS[hook] and getattr(out, f) not in (None, False)]
        if bad:
            self._middleware_error(mw, hook, ValueError(f"field(s) {', '.join(bad)} are not honoured in {hook} and were ignored"))
            out = out.model_copy(update={f: HookResult.model_fields[f].default for f in bad})
        return out

    def _apply(self, mw: Middleware, hr: HookResult | None, flags: TurnFlags, skip: tuple[str, ...] = ()) -> None:
        if hr is None:
            return
        name = type(mw).__name__
        if hr.replace_messages is not None and "replace_messages" not in skip:
            self.messages = [dict(m) for m in hr.replace_messages]
            self._known_tokens, self._chars_since = 0, sum(_chars(m) for m in self.messages)
            self.events.emit("messages_replaced", middleware=name, count=len(self.messages))
        if hr.add_message:
            flags.notes.append((name, hr.add_message))
        if hr.force_continue:
            flags.force_continue = True
        if hr.stop:
            flags.stop = flags.stop or hr.stop
            self.events.emit("middleware_stop", middleware=name, reason=hr.stop)

    def _flush_notes(self, flags: TurnFlags) -> None:
        for name, text in flags.notes:
            msg = {"role": "user", "content": FRAMEWORK_NOTE_PREFIX + text}
            self._append(msg, source="user", extra={"framework_note": True, "middleware": name})
            self.events.emit("framework_note", middleware=name, text=text)
        flags.notes.clear()
        if flags.stop:
            raise _Stop(StopReason.middleware_stop, flags.stop)

    def _middleware_error(self, mw: Middleware, hook: str, exc: BaseException) -> None:
        self._counts["middleware_errors"] += 1
        msg = short_error(exc)
        log.warning("middleware %s.%s failed: %s", type(mw).__name__, hook, msg)
        self.events.emit("middleware_error", middleware=type(mw).__name__, hook=hook, error=msg)

    # ------------------------------------------------------------------ sub-agents
    async def run_sub_agent(self, name: str, message: str) -> ToolResult:
        if self.depth + 1 > MAX_SUB_AGENT_DEPTH:
            return ToolResult(content=f"sub-agents may nest at most {MAX_SUB_AGENT_DEPTH} deep", is_error=True)
        try:
            sub = self.agent.sub_agent(name)
        except KeyError:
            return ToolResult(content=f"no sub-agent named {name!r}; available: {', '.join(self.agent.sub_agents)}", is_error=True)
        self._sub_runs += 1
        sub_dir = self.trace_dir / "sub_agents" / f"{self._sub_runs:02d}-{name}" if self.trace_dir else None
        remaining = None if self._deadline is None else max(0.1, self._deadline - time.monotonic())
        session = Session(
            sub,
            self.client,
            sandbox=self.sandbox,
            trace_dir=sub_dir,
            wall_clock_sec=remaining,
            working_directory=self.working_directory,
            prompt_variables=self.prompt_variables,
            session_id=f"{self.session_id}.{self._sub_runs}",
            depth=self.depth + 1,
        )
        res = await session.run(message)
        self.usage = self.usage.add(res.usage)
        self.events.emit("sub_agent_end", agent=name, session_id=res.session_id, stop_reason=res.stop_reason.value, turns=res.turns)
        if res.stop_reason == StopReason.infra_error:
            raise InfrastructureError(f"sub-agent {name}: {res.detail}", kind=res.infra_error_kind or "infrastructure")
        ref = {"session_id": res.session_id}
        if sub_dir is not None and self.trace_dir is not None:
            ref["trajectory_path"] = str((sub_dir / "trajectory.json").relative_to(self.trace_dir))
        answer = res.final_answer or f"(the sub-agent ended without an answer: {res.stop_reason.value})"
        return ToolResult(content=answer, metadata={"subagent_trajectory_ref": [ref], "sub_agent_stop": res.stop_reason.value})

    # ------------------------------------------------------------------ bookkeeping
    def _append(self, msg: dict[str, Any], *, source: str, extra: dict[str, Any] | None = None) -> None:
        self._append_raw(msg)
        step: dict[str, Any] = {"source": source, "message": msg.get("content") or ""}
        if extra:
            step["extra"] = extra
        self.trace.add_step(step)

    def _append_raw(self, msg: dict[str, Any]) -> None:
        self.messages.append(msg)
        self._chars_since += _chars(msg)

    def _estimated_context_tokens(self) -> int:
        return self._known_tokens + self._chars_since // 4

    def _trace_agent_step(self, r: ModelResponse) -> None:
        self.trace.add_step(agent_step(r))

    def _finish(self, result: SessionResult, t0: float, traj: Path | None, events: Path | None) -> None:
        result.turns = self.turn
        result.usage = self.usage
        result.duration_sec = round(time.monotonic() - t0, 4)
        result.tool_calls = self._counts["tool_calls"]
        result.tool_errors = self._counts["tool_errors"]
        result.middleware_errors = self._counts["middleware_errors"]
        result.trajectory_path = str(traj) if traj else None
        result.events_path = str(events) if events else None
        self.events.emit(
            "session_end",
            stop_reason=result.stop_reason.value,
            detail=result.detail,
            turns=result.turns,
            duration_sec=result.duration_sec,
        )
        final_metrics = {
            "total_prompt_tokens": self.usage.prompt_tokens,
            "total_completion_tokens": self.usage.completion_tokens,
            "total_cached_tokens": self.usage.cached_tokens,
            "total_steps": len(self.trace.steps),
            "extra": {"reasoning_tokens": self.usage.reasoning_tokens, "turns": self.turn},
        }
        if self.usage.cost_usd is not None:
            final_metrics["total_cost_usd"] = self.usage.cost_usd
        self.trace.finish(
            final_metrics=final_metrics,
            extra={
                "stop_reason": result.stop_reason.value,
                "detail": result.detail,
                "final_answer": result.final_answer,
                "duration_sec": result.duration_sec,
                "tool_calls": result.tool_calls,
                "tool_errors": result.tool_errors,
                "middleware_errors": result.middleware_errors,
            },
        )


def _chars(msg: dict[str, Any]) -> int:
    n = len(msg.get("content") or "")
    for tc in msg.get("tool_calls") or ():
        n += len(tc["function"]["arguments"] or "") + len(tc["function"]["name"])
    return n
