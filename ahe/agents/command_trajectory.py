"""The trajectory of a command-line agent's session, as ATIF for the debugger.

From the file the CLI wrote (ATIF, or an OpenAI message log: a JSON list, `{"messages": [...]}`
or JSON lines), or — when it wrote none, or one that does not parse — rebuilt from what the
gateway recorded (conversation.jsonl): the last request's messages plus the last answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ahe.confine.conversation import tool_arguments
from ahe.confine.gateway import read_conversation
from ahe.runtime.trace import ATIF_VERSION


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "" if content is None else json.dumps(content)


def atif_from_messages(messages: list[dict[str, Any]], *, session_id: str, source: str) -> dict[str, Any]:
    """Chat-completions messages as ATIF steps (tool results become the calling step's observation)."""
    steps: list[dict[str, Any]] = []
    calls_at: dict[str, dict[str, Any]] = {}
    for m in messages:
        if not isinstance(m, dict):
            continue
        role, text = m.get("role"), _text(m.get("content"))
        if role in ("system", "developer", "user"):
            steps.append({"step_id": len(steps) + 1, "source": "system" if role != "user" else "user", "message": text})
        elif role == "assistant":
            step: dict[str, Any] = {"step_id": len(steps) + 1, "source": "agent", "message": text}
            calls = []
            for i, tc in enumerate(m.get("tool_calls") or ()):
                fn = (tc.get("function") if isinstance(tc, dict) else None) or {}
                cid = str((tc or {}).get("id") or f"call_{len(steps) + 1}_{i}")
                calls.append({"tool_call_id": cid, "function_name": str(fn.get("name") or "?"),
                              "arguments": tool_arguments(fn.get("arguments"))})
                calls_at[cid] = step
            if calls:
                step["tool_calls"] = calls
            steps.append(step)
        elif role == "tool":
            cid = str(m.get("tool_call_id") or "")
            owner = calls_at.get(cid) or next((s for s in reversed(steps) if s["source"] == "agent"), None)
            if owner is None:
                continue
            owner.setdefault("observation", {"results": []})["results"].append(
                {"source_call_id": cid, "content": text})
    final = next((s["message"] for s in reversed(steps) if s["source"] == "agent" and not s.get("tool_calls")), None)
    return {"schema_version": ATIF_VERSION, "session_id": session_id,
            "agent": {"name": "command", "version": source}, "steps": steps,
            "extra": {"complete": True, "final_answer": final, "trajectory_source": source}}


def trajectory_from_conversation(path: Path, *, session_id: str = "command") -> dict[str, Any]:
    """The session as the gateway saw it: the longest call's messages and its answer (the agent's
    own thread grows with every turn; side calls such as a session title are short)."""
    calls = read_conversation(path) if Path(path).is_file() else []
    if not calls:
        return atif_from_messages([], session_id=session_id, source="gateway")
    last = max(reversed(calls), key=lambda c: len(c["messages"]))  # ties: the latest
    messages = list(last["messages"])
    resp = last.get("response")
    if isinstance(resp, dict):
        msg: dict[str, Any] = {"role": "assistant", "content": resp.get("content")}
        if resp.get("tool_calls"):
            msg["tool_calls"] = [{"id": tc.get("id"), "type": "function",
                                  "function": {"name": tc.get("name"), "arguments": tc.get("raw_arguments")}}
                                 for tc in resp["tool_calls"]]
        messages.append(msg)
    return atif_from_messages(messages, session_id=session_id, source="gateway")


def parse_trajectory(data: bytes, fmt: str, *, session_id: str) -> dict[str, Any]:
    """The CLI's own trajectory file as ATIF; ValueError with the reason when it is not one."""
    text = data.decode("utf-8")
    if fmt == "atif":
        doc = json.loads(text)
        if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
            raise ValueError("not an ATIF trajectory (a JSON object with a `steps` list)")
        return doc
    try:
        doc = json.loads(text)
    except ValueError:
        doc = [json.loads(line) for line in text.splitlines() if line.strip()]  # JSON lines
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        doc = doc["messages"]
    if not isinstance(doc, list) or not all(isinstance(m, dict) and "role" in m for m in doc):
        raise ValueError("not an OpenAI message log (a list of {role, content} objects, "
                         "{\"messages\": [...]} or JSON lines)")
    return atif_from_messages(doc, session_id=session_id, source="cli")


def count_tool_calls(atif: dict[str, Any]) -> int:
    return sum(len(s.get("tool_calls") or ()) for s in atif.get("steps", ()) if isinstance(s, dict))
