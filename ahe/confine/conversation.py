"""An ATIF trajectory rebuilt from what the model gateway recorded (conversation.jsonl).

The worker writes its own trajectory.json, but that file is harness code's word: a harness
could write any story there. The gateway's record is the host's: every request as it reached
the model and every answer as it came back. `trajectory_from_conversation` turns it into the
trajectory the debugger, the replay and the evolve agent read (the format of
ahe/runtime/trace.py): system and user messages as steps, each model answer as an agent step
with its tool calls, and the tool results the next request carried as that step's observation.

Requests that do not continue one conversation are told apart by their first message (a
sub-agent has its own system prompt): the first call's conversation is the trajectory's steps,
the others go to `extra.sub_conversations`. A request that rewrote earlier messages (a
compaction hook) continues its conversation from the first changed message, marked
`context_rewritten`. What the gateway cannot know (whether a tool result was an error, what a
tool's metadata said) is not invented here; see `attach_claimed_metadata`.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ATIF_VERSION = "ATIF-v1.4"  # as ahe/runtime/trace.py writes (not imported: the worker's side)
CLAIM_FILE = "trajectory.claimed.json"  # the worker's own trajectory, kept beside the gateway's


def _iso(ts: Any) -> str | None:
    if not isinstance(ts, (int, float)):
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds")


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content, ensure_ascii=False)


def tool_arguments(raw: Any) -> Any:
    """A tool call's arguments as an object (the raw text kept under `_raw` when it is not one)."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


def _assistant(resp: dict[str, Any]) -> dict[str, Any]:
    """The message the runtime appends for this answer (ModelResponse.assistant_message)."""
    msg: dict[str, Any] = {"role": "assistant", "content": resp.get("content")}
    calls = resp.get("tool_calls") or []
    if calls:
        msg["tool_calls"] = [{"id": tc.get("id"), "type": "function",
                              "function": {"name": tc.get("name"), "arguments": tc.get("raw_arguments", "")}}
                             for tc in calls]
    return msg


def _agent_step(resp: dict[str, Any], latency: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"source": "agent", "model_name": resp.get("model"), "message": resp.get("content") or ""}
    if resp.get("reasoning_content"):
        step["reasoning_content"] = resp["reasoning_content"]
    calls = [{"tool_call_id": tc.get("id"), "function_name": tc.get("name"),
              "arguments": tc["arguments"] if isinstance(tc.get("arguments"), dict) else {"_raw": tc.get("raw_arguments", "")}}
             for tc in resp.get("tool_calls") or () if isinstance(tc, dict)]
    if calls:
        step["tool_calls"] = calls
    usage = resp.get("usage") or {}
    metrics: dict[str, Any] = {"prompt_tokens": usage.get("prompt_tokens", 0),
                               "completion_tokens": usage.get("completion_tokens", 0),
                               "cached_tokens": usage.get("cached_tokens", 0),
                               "extra": {"reasoning_tokens": usage.get("reasoning_tokens", 0), "latency_sec": latency,
                                         "attempts": resp.get("attempts", 1)}}
    if usage.get("cost_usd") is not None:
        metrics["cost_usd"] = usage["cost_usd"]
    step["metrics"] = metrics
    return step


class _Thread:
    """One conversation: the messages the model has seen so far and the steps made of them."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []
        self.calls_at: dict[str, dict[str, Any]] = {}

    def add(self, step: dict[str, Any], ts: str | None) -> dict[str, Any]:
        step = {"step_id": len(self.steps) + 1, **({"timestamp": ts} if ts else {}), **step}
        self.steps.append(step)
        return step

    def message(self, m: dict[str, Any], ts: str | None, rewritten: bool) -> None:
        role, extra = m.get("role"), ({"context_rewritten": True} if rewritten else {})
        if role == "tool":
            step = self.calls_at.get(str(m.get("tool_call_id")))
            if step is not None and not rewritten:
                tool = next((c["function_name"] for c in step.get("tool_calls", ()) if c["tool_call_id"] == m.get("tool_call_id")), "?")
                step.setdefault("observation", {"results": []})["results"].append(
                    {"source_call_id": m.get("tool_call_id"), "content": _text(m.get("content")), "extra": {"tool": tool}})
                return
            extra["tool_call_id"] = m.get("tool_call_id")
        step: dict[str, Any] = {"source": "agent" if role == "assistant" else ("user" if role == "user" else "system"),
                                "message": _text(m.get("content"))}
        if role == "assistant":  # an answer the model never gave: put in the history by the harness
            extra["not_from_the_model"] = True
            if m.get("tool_calls"):
                step["tool_calls"] = [{"tool_call_id": tc.get("id"), "function_name": (tc.get("function") or {}).get("name"),
                                       "arguments": tool_arguments((tc.get("function") or {}).get("arguments"))}
                                      for tc in m["tool_calls"] if isinstance(tc, dict)]
        if role not in ("system", "user", "assistant"):
            extra["role"] = role
        if extra:
            step["extra"] = extra
        self.add(step, ts)

    def call(self, messages: list[dict[str, Any]], row: dict[str, Any]) -> None:
        common = 0
        for old, new in zip(self.seen, messages):
            if old != new:
                break
            common += 1
        rewritten = common < len(self.seen)
        ts = _iso(row.get("ts"))
        for m in messages[common:]:
            self.message(m, ts, rewritten)
        resp = row.get("response")
        if isinstance(resp, dict):
            step = self.add(_agent_step(resp, row.get("latency_sec")), ts)
            for tc in step.get("tool_calls", ()):
                self.calls_at[str(tc["tool_call_id"])] = step
            self.seen = list(messages) + [_assistant(resp)]
        else:
            self.add({"source": "system", "message": f"the model call failed: {row.get('error')}",
                      "extra": {"gateway_error": True}}, ts)
            self.seen = list(messages)


def _rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:  # a line cut short by a kill: the rest is still the record
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _final(steps: list[dict[str, Any]]) -> str | None:
    return next((s["message"] for s in reversed(steps) if s["source"] == "agent" and not s.get("tool_calls")), None)


def trajectory_from_conversation(path: Path) -> dict[str, Any]:
    """The ATIF trajectory of a gateway's conversation.jsonl (see the module docstring)."""
    threads: dict[str, _Thread] = {}
    order: list[_Thread] = []
    last: list[dict[str, Any]] = []
    refused: list[str] = []
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0, "reasoning_tokens": 0}
    cost, calls, failed, omitted = None, 0, 0, 0
    for row in _rows(path):
        if "refused" in row:
            refused.append(str(row["refused"]))
            continue
        if "call" not in row:
            continue
        calls += 1
        prefix = row.get("prefix") if isinstance(row.get("prefix"), int) else 0
        if "omitted" in row:  # past the record's limit: only the answer is known
            omitted += 1
        last = last[:prefix] + [m for m in row.get("messages") or () if isinstance(m, dict)]
        key = json.dumps(last[0], sort_keys=True, ensure_ascii=False) if last else ""
        if key not in threads:
            threads[key] = _Thread()
            order.append(threads[key])
        threads[key].call(last, row)
        resp = row.get("response")
        if isinstance(resp, dict):
            usage = resp.get("usage") or {}
            for k in totals:
                totals[k] += int(usage.get(k) or 0)
            if usage.get("cost_usd") is not None:
                cost = (cost or 0.0) + float(usage["cost_usd"])
        else:
            failed += 1
    main = order[0] if order else _Thread()
    metrics: dict[str, Any] = {"total_prompt_tokens": totals["prompt_tokens"],
                               "total_completion_tokens": totals["completion_tokens"],
                               "total_cached_tokens": totals["cached_tokens"], "total_steps": len(main.steps),
                               "extra": {"reasoning_tokens": totals["reasoning_tokens"], "calls": calls,
                                         "failed_calls": failed}}
    if cost is not None:
        metrics["total_cost_usd"] = cost
    extra: dict[str, Any] = {"complete": True, "source": "gateway", "final_answer": _final(main.steps),
                             "refused": refused[:100], "sub_conversations": [{"steps": t.steps} for t in order[1:]]}
    if omitted:
        extra["calls_without_messages"] = omitted
    return {"schema_version": ATIF_VERSION, "session_id": Path(path).parent.name,
            "agent": {"name": "gateway-record", "version": "ahe"}, "steps": main.steps,
            "final_metrics": metrics, "extra": extra}


def _msg_key(messages: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    return tuple((str(m.get("role")), _text(m.get("content"))) for m in messages[:2])


def sub_agent_trajectories(path: Path, claims: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The trajectory of each sub-agent run (`claims`: its folder under the trial, e.g.
    `sub_agents/01-verifier`, → the worker's claimed trajectory of it), rebuilt from the gateway's
    record as the main one is. A sub-agent run is a conversation of its own: its first two
    messages (its system prompt and its task) tell it apart from the main one and from other runs.
    The claim only says which of those conversations is whose (its first two steps); the steps are
    the gateway's. A claim that matches no conversation the gateway saw gets no steps and says so
    (`no_matching_conversation`); a conversation no claim names stays in the main trajectory's
    `sub_conversations` only."""
    threads: dict[tuple, list[_Thread]] = {}
    order: list[tuple[tuple, _Thread]] = []
    last: list[dict[str, Any]] = []
    for row in _rows(path):
        if "call" not in row:
            continue
        prefix = row.get("prefix") if isinstance(row.get("prefix"), int) else 0
        last = last[:prefix] + [m for m in row.get("messages") or () if isinstance(m, dict)]
        key = _msg_key(last)
        if key not in threads:
            threads[key] = [_Thread()]
            order.append((key, threads[key][0]))
        threads[key][0].call(last, row)
    main_key = order[0][0] if order else None
    used: set[int] = set()
    out = {}
    for folder in sorted(claims):
        claim = claims[folder] if isinstance(claims[folder], dict) else {}
        steps = [s for s in claim.get("steps") or () if isinstance(s, dict)][:2]
        want = tuple(({"system": "system", "user": "user"}.get(str(s.get("source")), "?"), _text(s.get("message")))
                     for s in steps)
        found = next((t for k, t in order if k == want and k != main_key and id(t) not in used), None)
        extra: dict[str, Any] = {"complete": True, "source": "gateway", "claim": CLAIM_FILE}
        if found is None:
            extra["no_matching_conversation"] = True
        else:
            used.add(id(found))
        sub_steps = found.steps if found is not None else []
        traj = {"schema_version": ATIF_VERSION, "session_id": Path(folder).name,
                "agent": {"name": "gateway-record", "version": "ahe"}, "steps": sub_steps,
                "final_metrics": _sums(sub_steps), "extra": {**extra, "final_answer": _final(sub_steps)}}
        attach_claimed_metadata(traj, claim)
        out[folder] = traj
    return out


def _sums(steps: list[dict[str, Any]]) -> dict[str, Any]:
    m = [s.get("metrics") or {} for s in steps if s.get("source") == "agent" and s.get("metrics")]
    out: dict[str, Any] = {"total_prompt_tokens": sum(int(x.get("prompt_tokens") or 0) for x in m),
                           "total_completion_tokens": sum(int(x.get("completion_tokens") or 0) for x in m),
                           "total_cached_tokens": sum(int(x.get("cached_tokens") or 0) for x in m),
                           "total_steps": len(steps), "extra": {"calls": len(m)}}
    if any(x.get("cost_usd") is not None for x in m):
        out["total_cost_usd"] = sum(float(x.get("cost_usd") or 0.0) for x in m)
    return out


def attach_claimed_metadata(traj: dict[str, Any], claim: dict[str, Any]) -> int:
    """Copy, from the worker's own trajectory, what only the harness knows about a tool result
    (is_error, the tool's metadata, a sub-agent's trajectory reference) onto each result whose
    call id and content the gateway saw too (marked `claimed_metadata`); the content stays the
    gateway's. A tool call whose result no later request carried (the stop tool's, the last
    turn's before a kill) gets the claim's result whole, marked `claimed`: the model never saw
    it, so only the harness vouches for it. Returns how many results took something from the claim."""
    by_id: dict[str, dict[str, Any]] = {}
    for step in claim.get("steps") or () if isinstance(claim, dict) else ():
        obs = step.get("observation") if isinstance(step, dict) else None
        for r in (obs.get("results") or ()) if isinstance(obs, dict) else ():
            if isinstance(r, dict) and isinstance(r.get("content"), str):
                by_id.setdefault(str(r.get("source_call_id")), r)
    n = 0
    for step in traj.get("steps") or ():
        results = (step.get("observation") or {}).get("results") or []
        for r in results:
            c = by_id.get(str(r.get("source_call_id")))
            if c is None or c["content"] != r.get("content"):
                continue
            extra = c.get("extra") if isinstance(c.get("extra"), dict) else {}
            r["extra"] = {**extra, **r["extra"], "claimed_metadata": True}
            if c.get("subagent_trajectory_ref") is not None:
                r["subagent_trajectory_ref"] = c["subagent_trajectory_ref"]
            n += 1
        answered = {str(r.get("source_call_id")) for r in results}
        for tc in step.get("tool_calls") or ():
            c = by_id.get(str(tc.get("tool_call_id")))
            if str(tc.get("tool_call_id")) in answered or c is None:
                continue
            extra = c.get("extra") if isinstance(c.get("extra"), dict) else {}
            item = {"source_call_id": tc.get("tool_call_id"), "content": c["content"],
                    "extra": {**extra, "tool": tc.get("function_name"), "claimed": True}}
            if c.get("subagent_trajectory_ref") is not None:
                item["subagent_trajectory_ref"] = c["subagent_trajectory_ref"]
            step.setdefault("observation", {"results": []})["results"].append(item)
            n += 1
    return n


__all__ = ["CLAIM_FILE", "attach_claimed_metadata", "sub_agent_trajectories", "trajectory_from_conversation"]
