"""mini-swe-agent's messages as what the rest of AHE reads: an ATIF trajectory and a stop reason.

mini keeps one message list (`agent.messages`): system, the instance prompt, then the model's
replies (their `extra.actions`, each a bash command) and the observations (role `tool` for
tool-call configs, `user` with `extra.returncode` for text-based ones), format-error notes
(`extra.interrupt_type: FormatError`) and a final `exit` message whose `extra.exit_status`
says why it stopped. Pure data: no import of mini-swe-agent, so it is tested on its own.
"""

from __future__ import annotations

from typing import Any

from ahe.errors import ContextLengthError, InfrastructureError
from ahe.runtime.results import StopReason
from ahe.runtime.trace import ATIF_VERSION

TOOL = "bash"  # every mini action is one bash command

# mini's exit statuses → AHE's stop reasons (docs/backends.md)
EXIT_STOP = {
    "Submitted": StopReason.stop_tool,
    "LimitsExceeded": StopReason.max_turns,
    "TimeExceeded": StopReason.wall_clock,
    "RepeatedFormatError": StopReason.no_tool_call,
    "UserInterruption": StopReason.cancelled,
}


def text_of(content: Any) -> str:
    """A message's text (mini's multimodal content is a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def _extra(m: dict[str, Any]) -> dict[str, Any]:
    e = m.get("extra")
    return e if isinstance(e, dict) else {}


def _agent_step(m: dict[str, Any], n: int) -> dict[str, Any]:
    extra = _extra(m)
    step: dict[str, Any] = {"step_id": n, "source": "agent", "message": text_of(m.get("content"))}
    if extra.get("model_name"):
        step["model_name"] = extra["model_name"]
    reasoning = extra.get("reasoning_content") or m.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        step["reasoning_content"] = reasoning
    calls = []
    for i, action in enumerate(extra.get("actions") or ()):
        if isinstance(action, dict):
            cid = str(action.get("tool_call_id") or f"action_{n}_{i}")
            calls.append({"tool_call_id": cid, "function_name": TOOL, "arguments": {"command": action.get("command", "")}})
    if calls:
        step["tool_calls"] = calls
    usage = extra.get("usage")
    if isinstance(usage, dict):
        step["metrics"] = {k: usage.get(k, 0) for k in ("prompt_tokens", "completion_tokens", "cached_tokens")}
        if usage.get("cost_usd") is not None:
            step["metrics"]["cost_usd"] = usage["cost_usd"]
    return step


def _observe(step: dict[str, Any] | None, m: dict[str, Any]) -> bool:
    """Add observation `m` to `step` (the agent step whose action it answers); False if none fits."""
    if step is None or not step.get("tool_calls"):
        return False
    results = step.setdefault("observation", {"results": []})["results"]
    calls = step["tool_calls"]
    cid = m.get("tool_call_id")
    if not cid or cid not in {c["tool_call_id"] for c in calls}:
        if len(results) >= len(calls):
            return False
        cid = calls[len(results)]["tool_call_id"]
    rc = _extra(m).get("returncode")
    results.append({"source_call_id": cid, "content": text_of(m.get("content")),
                    "extra": {"tool": TOOL, "is_error": rc not in (0, None), "returncode": rc}})
    return True


def mini_to_atif(messages: list[dict[str, Any]], *, session_id: str, agent: dict[str, Any],
                 extra: dict[str, Any] | None = None, complete: bool = True) -> dict[str, Any]:
    """The ATIF trajectory of a mini-swe-agent message list (what the debugger reads)."""
    steps: list[dict[str, Any]] = []
    last_agent: dict[str, Any] | None = None
    exit_extra: dict[str, Any] = {}
    for m in messages:
        if not isinstance(m, dict):
            continue
        role, n = m.get("role"), len(steps) + 1
        if role == "exit":
            exit_extra = _extra(m)
            if exit_extra.get("exit_status") == "Submitted":  # the submit command's own result
                _observe(last_agent, {"content": text_of(m.get("content")) or "(submitted)",
                                      "extra": {"returncode": 0}})
        elif role == "system":
            steps.append({"step_id": n, "source": "system", "message": text_of(m.get("content"))})
        elif role == "assistant":
            last_agent = _agent_step(m, n)
            steps.append(last_agent)
        elif role == "tool" or (role == "user" and "returncode" in _extra(m)):
            if not _observe(last_agent, m):
                steps.append({"step_id": n, "source": "user", "message": text_of(m.get("content"))})
        elif role == "user":
            step = {"step_id": n, "source": "user", "message": text_of(m.get("content"))}
            kind = _extra(m).get("interrupt_type")
            if kind == "FormatError" and "model_response" in _extra(m):  # the reply mini could not parse
                last_agent = None
                steps.append({"step_id": n, "source": "agent", "message": text_of(_extra(m)["model_response"]),
                              "extra": {"unparsed": True}})
                step["step_id"] = n + 1
            if kind:  # mini's own note to the model (a format error): not the task's words
                step["extra"] = {"framework_note": True, "mini": kind}
            steps.append(step)
    out_extra = {"complete": complete, "exit_status": exit_extra.get("exit_status", ""),
                 "submission": exit_extra.get("submission", ""), **(extra or {})}
    return {"schema_version": ATIF_VERSION, "session_id": session_id, "agent": agent, "steps": steps,
            "final_metrics": _final_metrics(steps), "extra": out_extra}


def _final_metrics(steps: list[dict[str, Any]]) -> dict[str, Any]:
    tot = {"total_prompt_tokens": 0, "total_completion_tokens": 0, "total_cached_tokens": 0}
    for s in steps:
        m = s.get("metrics") or {}
        tot["total_prompt_tokens"] += int(m.get("prompt_tokens") or 0)
        tot["total_completion_tokens"] += int(m.get("completion_tokens") or 0)
        tot["total_cached_tokens"] += int(m.get("cached_tokens") or 0)
    tot["total_steps"] = len(steps)
    return tot


def counts(messages: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(turns, tool calls, tool errors): model replies, executed actions (the submit command included,
    as the trajectory shows it), actions that failed."""
    turns = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
    obs = [m for m in messages if isinstance(m, dict)
           and (m.get("role") == "tool" or (m.get("role") == "user" and "returncode" in _extra(m)))]
    errors = sum(1 for m in obs if _extra(m).get("returncode") not in (0, None))
    submitted = any(isinstance(m, dict) and m.get("role") == "exit" and _extra(m).get("exit_status") == "Submitted"
                    for m in messages)  # the submit command ran too (its output is the submission)
    return turns, len(obs) + submitted, errors


def stop_of(exit_status: str, exc: BaseException | None) -> tuple[StopReason, str | None, str | None]:
    """(stop reason, detail, infra kind) of a mini session that ended with `exit_status` / `exc`."""
    if isinstance(exc, ContextLengthError):
        return StopReason.context_budget, str(exc)[:500], None
    if isinstance(exc, InfrastructureError):
        return StopReason.infra_error, str(exc)[:500], getattr(exc, "kind", None) or "infrastructure"
    if exc is not None and type(exc).__name__ == "RemoteError":  # the gateway refused (budget, bad request)
        return StopReason.infra_error, f"the gateway refused: {exc}"[:500], "budget"
    if exc is not None:  # the harness's own loop failed (a template, a custom class): its failure, not the world's
        return StopReason.middleware_stop, f"mini-swe-agent raised {type(exc).__name__}: {exc}"[:500], None
    stop = EXIT_STOP.get(exit_status)
    if stop is None:
        return StopReason.middleware_stop, f"mini-swe-agent stopped: {exit_status or 'no exit status'}"[:500], None
    detail = {"LimitsExceeded": "mini-swe-agent's step_limit or cost_limit was reached",
              "TimeExceeded": "mini-swe-agent's wall_time_limit_seconds was reached",
              "RepeatedFormatError": "mini-swe-agent's max_consecutive_format_errors was reached"}.get(exit_status)
    return stop, detail, None


def mini_events(messages: list[dict[str, Any]], *, session_id: str, started: float,
                end: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """events.jsonl rows in AHE's vocabulary (session_start, model_call, tool_call, session_end),
    so a mini trial folder holds the same files as any other trial's."""
    rows: list[dict[str, Any]] = [{"ts": started, "type": "session_start", "session_id": session_id,
                                   "agent": "mini-swe-agent", "depth": 0}]
    turn = 0
    for m in messages:
        if not isinstance(m, dict):
            continue
        extra, role = _extra(m), m.get("role")
        if role == "assistant" or extra.get("interrupt_type") == "FormatError":
            turn += 1
            actions = [a for a in extra.get("actions") or () if isinstance(a, dict)]
            usage = extra.get("usage") if isinstance(extra.get("usage"), dict) else {}
            rows.append({"ts": extra.get("timestamp", started), "type": "model_call", "turn": turn, "usage": usage,
                         "tool_calls": [TOOL] * len(actions)})
            if role != "assistant":
                rows.append({"ts": extra.get("timestamp", started), "type": "format_error", "turn": turn})
        elif role == "tool" or (role == "user" and "returncode" in extra):
            rows.append({"ts": extra.get("timestamp", started), "type": "tool_call", "turn": turn,
                         "id": m.get("tool_call_id"), "tool": TOOL, "is_error": extra.get("returncode") not in (0, None)})
    if end is not None:
        rows.append({"type": "session_end", **end})
    return rows
