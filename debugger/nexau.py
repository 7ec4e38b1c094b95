"""The NexAU in-memory tracer dump → ATIF.

`InMemoryTracer.dump_traces()` gives a list of root spans, each a dict with `id`, `name`,
`type` (AGENT, SUB_AGENT, LLM, TOOL, and workflow/compaction kinds), `inputs`, `outputs`,
`attributes`, `error`, `start_time`, `end_time` and nested `children`. An LLM span's inputs
are the request (`messages`, `model`, `tools`; Anthropic: `system` + `messages`) and its
outputs the serialized response (OpenAI `choices[0].message`, Anthropic content blocks, or
NexAU's own `{content, tool_calls}`); a TOOL span (`Tool: <name>`) has inputs
`{parameters, tool_call_id}` and outputs `{result}`. Each LLM span becomes an agent step;
each TOOL span a result on the latest agent step (with a tool call added when the model
called tools in text, as NexAU's XML mode does); a nested AGENT/SUB_AGENT span becomes a
sub-agent trajectory referenced from the step that ran it. Other span kinds are walked
through.
"""

from __future__ import annotations

import json
from typing import Any

from ahe.runtime.trace import ATIF_VERSION
from debugger.render import content_text, safe_name

_USER_KEYS = ("message", "query", "user_message", "input", "task", "prompt", "instruction")
_FINAL_KEYS = ("result", "response", "final_answer", "output", "message", "answer")


def _type(span: dict[str, Any]) -> str:
    return str(span.get("type") or "").upper()


def _children(span: dict[str, Any]) -> list[dict[str, Any]]:
    kids = [c for c in span.get("children") or () if isinstance(c, dict)]
    return sorted(kids, key=lambda c: c.get("start_time") or 0)


def _first_str(d: Any, keys: tuple[str, ...]) -> str | None:
    if isinstance(d, dict):
        for k in keys:
            if isinstance(d.get(k), str) and d[k].strip():
                return d[k]
    return None


def tool_arguments(raw: Any) -> Any:
    """Tool-call arguments as a dict, whatever form the trace stored them in."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            v = json.loads(raw) if raw.strip() else {}
            return v if isinstance(v, dict) else {"_raw": raw}
        except ValueError:
            return {"_raw": raw}
    return {} if raw is None else {"_raw": str(raw)}


def _response(out: Any) -> tuple[str, str | None, list[dict[str, Any]], dict[str, int], str | None]:
    """(text, reasoning, tool calls, usage, model) of an LLM span's outputs."""
    if not isinstance(out, dict):
        return (str(out) if out is not None else ""), None, [], {}, None
    usage_in = out.get("usage") if isinstance(out.get("usage"), dict) else {}
    usage = {"prompt_tokens": int(usage_in.get("prompt_tokens") or usage_in.get("input_tokens") or 0),
             "completion_tokens": int(usage_in.get("completion_tokens") or usage_in.get("output_tokens") or 0)}
    model = out.get("model") if isinstance(out.get("model"), str) else None
    calls: list[dict[str, Any]] = []
    reasoning = None
    if isinstance(out.get("choices"), list) and out["choices"]:
        msg = (out["choices"][0] or {}).get("message") or {}
        text, _ = content_text(msg.get("content"))
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        for i, tc in enumerate(msg.get("tool_calls") or ()):
            fn = tc.get("function") or {}
            calls.append({"tool_call_id": str(tc.get("id") or f"call_{i}"), "function_name": str(fn.get("name") or "?"),
                          "arguments": tool_arguments(fn.get("arguments"))})
        return text, reasoning if isinstance(reasoning, str) else None, calls, usage, model
    content = out.get("content")
    if isinstance(content, list):  # Anthropic content blocks
        texts = []
        for b in content:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "text":
                texts.append(str(b.get("text") or ""))
            elif b.get("type") == "thinking":
                reasoning = str(b.get("thinking") or "")
            elif b.get("type") == "tool_use":
                calls.append({"tool_call_id": str(b.get("id") or f"toolu_{len(calls)}"), "function_name": str(b.get("name") or "?"),
                              "arguments": tool_arguments(b.get("input"))})
        return "\n".join(texts), reasoning, calls, usage, model
    text = content if isinstance(content, str) else (_first_str(out, ("result", "response", "text")) or "")
    for i, tc in enumerate(out.get("tool_calls") or ()):
        if not isinstance(tc, dict):
            continue
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
        calls.append({"tool_call_id": str(tc.get("id") or tc.get("tool_call_id") or f"call_{i}"),
                      "function_name": str(fn.get("name") or fn.get("tool_name") or "?"),
                      "arguments": tool_arguments(fn.get("arguments") if "arguments" in fn else fn.get("parameters"))})
    reasoning = out.get("reasoning_content") if isinstance(out.get("reasoning_content"), str) else None
    return text, reasoning, calls, usage, model


class _Converter:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.steps: list[dict[str, Any]] = []
        self.subs: list[tuple[str, dict[str, Any], list]] = []  # (name, trajectory, its own sub-agents)
        self.users_seen = 0
        self.prompt_done = False
        self.tool_n = 0

    def convert(self) -> dict[str, Any]:
        for child in _children(self.root):
            self.visit(child)
        if not self.prompt_done:
            self.prompt(None)
        for i, s in enumerate(self.steps, 1):
            s["step_id"] = i
        outputs = self.root.get("outputs")
        final = _first_str(outputs, _FINAL_KEYS)
        last = self.steps[-1] if self.steps else {}
        if final is None and last.get("source") == "agent" and not last.get("tool_calls"):
            final = last.get("message")
        extra: dict[str, Any] = {"complete": self.root.get("end_time") is not None, "final_answer": final,
                                 "imported_from": "nexau", "span": self.root.get("name")}
        if self.root.get("error"):
            extra["stop_reason"], extra["detail"] = "error", str(self.root["error"])[:500]
        elif last.get("source") == "agent" and not last.get("tool_calls"):
            extra["stop_reason"] = "no_tool_call"
        start, end = self.root.get("start_time"), self.root.get("end_time")
        if isinstance(start, (int, float)) and isinstance(end, (int, float)):
            extra["duration_sec"] = round(end - start, 3)
        attrs = self.root.get("attributes") if isinstance(self.root.get("attributes"), dict) else {}
        return {"schema_version": ATIF_VERSION, "session_id": str(self.root.get("id") or ""),
                "agent": {"name": str(attrs.get("agent_name") or self.root.get("name") or "nexau"), "version": "nexau"},
                "steps": self.steps, "extra": extra}

    def prompt(self, messages: list[Any] | None, system: Any = None) -> None:
        """System and user steps from the first request, else from the root span's inputs."""
        self.prompt_done = True
        if system is not None:
            text, _ = content_text(system)
            if text:
                self.steps.append({"source": "system", "message": text})
        for m in messages or ():
            if not isinstance(m, dict):
                continue
            text, _ = content_text(m.get("content"))
            if m.get("role") in ("system", "developer"):
                self.steps.append({"source": "system", "message": text})
            elif m.get("role") == "user" and not _is_tool_result(m):
                self.steps.append({"source": "user", "message": text})
                self.users_seen += 1
        if self.users_seen == 0:
            text = _first_str(self.root.get("inputs"), _USER_KEYS)
            if text:
                self.steps.append({"source": "user", "message": text})

    def visit(self, span: dict[str, Any]) -> None:
        kind = _type(span)
        if kind == "LLM":
            self.llm(span)
        elif kind == "TOOL":
            self.tool(span)
        elif kind in ("AGENT", "SUB_AGENT"):
            self.sub_agent(span)
        else:
            for child in _children(span):
                self.visit(child)

    def llm(self, span: dict[str, Any]) -> None:
        inputs = span.get("inputs") if isinstance(span.get("inputs"), dict) else {}
        messages = inputs.get("messages") if isinstance(inputs.get("messages"), list) else None
        if not self.prompt_done:
            self.prompt(messages, inputs.get("system"))
        elif messages:  # user messages added since the last call (middleware notes, follow-ups)
            users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user" and not _is_tool_result(m)]
            for m in users[self.users_seen:]:
                text, _ = content_text(m.get("content"))
                self.steps.append({"source": "user", "message": text, "extra": {"framework_note": True, "middleware": "nexau"}})
            self.users_seen = max(self.users_seen, len(users))
        text, reasoning, calls, usage, model = _response(span.get("outputs"))
        if span.get("error"):
            text = (text + "\n" if text else "") + f"[the model call failed: {span['error']}]"
        step: dict[str, Any] = {"source": "agent", "model_name": model or inputs.get("model"), "message": text}
        if reasoning:
            step["reasoning_content"] = reasoning
        if calls:
            step["tool_calls"] = calls
        if any(usage.values()):
            step["metrics"] = {**usage, "cached_tokens": 0}
        self.steps.append(step)

    def _agent_step(self) -> dict[str, Any]:
        step = next((s for s in reversed(self.steps) if s["source"] == "agent"), None)
        if step is None:
            if not self.prompt_done:
                self.prompt(None)
            step = {"source": "agent", "message": ""}
            self.steps.append(step)
        return step

    def tool(self, span: dict[str, Any]) -> None:
        inputs = span.get("inputs") if isinstance(span.get("inputs"), dict) else {}
        attrs = span.get("attributes") if isinstance(span.get("attributes"), dict) else {}
        name = str(attrs.get("tool_name") or span.get("name") or "?").removeprefix("Tool: ").strip() or "?"
        params = inputs.get("parameters") if "parameters" in inputs else inputs.get("arguments", {
            k: v for k, v in inputs.items() if k != "tool_call_id"})
        cid = inputs.get("tool_call_id")
        step = self._agent_step()
        calls = step.setdefault("tool_calls", [])
        if not cid or not any(c["tool_call_id"] == cid for c in calls):
            self.tool_n += 1
            cid = str(cid or f"tool_{self.tool_n}")
            calls.append({"tool_call_id": cid, "function_name": name, "arguments": tool_arguments(params)})
        outputs = span.get("outputs")
        result = outputs.get("result", outputs) if isinstance(outputs, dict) else outputs
        is_error = bool(span.get("error")) or (isinstance(result, dict) and result.get("status") == "error")
        content = result if isinstance(result, str) else ("" if result is None else json.dumps(result, ensure_ascii=False, default=str))
        if span.get("error") and str(span["error"]) not in content:
            content = (content + "\n" if content else "") + f"error: {span['error']}"
        step.setdefault("observation", {"results": []})["results"].append(
            {"source_call_id": cid, "content": content, "extra": {"tool": name, "is_error": is_error}})
        for child in _children(span):  # a tool that ran a sub-agent
            self.visit(child)

    def sub_agent(self, span: dict[str, Any]) -> None:
        traj, nested = nexau_to_atif(span)
        name = str(span.get("name") or "sub-agent").removeprefix("Agent: ").strip() or "sub-agent"
        self.subs.append((name, traj, nested))
        k = len(self.subs)
        path = f"sub_agents/{k:02d}-{safe_name(name)}/trajectory.json"
        step = self._agent_step()
        final = (traj.get("extra") or {}).get("final_answer") or "(no answer)"
        step.setdefault("observation", {"results": []})["results"].append(
            {"source_call_id": f"sub_{k}", "content": str(final), "subagent_trajectory_ref": [{"trajectory_path": path}],
             "extra": {"tool": "sub_agent", "is_error": bool(span.get("error"))}})


def _is_tool_result(m: dict[str, Any]) -> bool:
    c = m.get("content")
    return isinstance(c, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in c)


def nexau_to_atif(root: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any], list]]]:
    """(ATIF trajectory, [(sub-agent name, its trajectory, its sub-agents)]) of one root span."""
    conv = _Converter(root)
    traj = conv.convert()
    return traj, conv.subs
