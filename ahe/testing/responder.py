"""Per-request matching for the mock model: which rule answers, and what exactly it says.

Kept apart from the HTTP layer so the policy semantics (conditions, `times`, templates,
deterministic usage) can be read and tested in one place. Views of the request are computed
lazily: most rules decide on the model name or the turn before any text is scanned.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import random
import threading
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ahe.testing.policy import CompiledPolicy, CompiledResponse, CompiledRule, Fault, Policy


def _text(content: Any) -> str:
    """Text of a message `content`: a string, or a list of parts ({"type": "text", "text": ...})."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def _ceil4(n: int) -> int:
    return (n + 3) // 4


class Conversation:
    """Lazy views of one chat-completions request body."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        msgs = body.get("messages")
        self.messages: list[dict[str, Any]] = [m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []
        self.model: str = str(body.get("model") or "")

    @cached_property
    def turn(self) -> int:
        return 1 + sum(1 for m in self.messages if m.get("role") == "assistant")

    @cached_property
    def system_text(self) -> str:
        return "\n".join(_text(m.get("content")) for m in self.messages if m.get("role") in ("system", "developer"))

    def _last(self, role: str) -> str | None:
        for m in reversed(self.messages):
            if m.get("role") == role:
                return _text(m.get("content"))
        return None

    @cached_property
    def first_user(self) -> str:
        for m in self.messages:
            if m.get("role") == "user":
                return _text(m.get("content"))
        return ""

    @cached_property
    def last_user(self) -> str:
        return self._last("user") or ""

    @cached_property
    def last_tool_result(self) -> str | None:
        return self._last("tool")

    @cached_property
    def all_text(self) -> str:
        """Every message's content and tool-call arguments, NUL-separated so no match spans two."""
        parts = []
        for m in self.messages:
            parts.append(_text(m.get("content")))
            for tc in m.get("tool_calls") or ():
                fn = (tc.get("function") if isinstance(tc, dict) else None) or {}
                parts.append(f"{fn.get('name', '')} {fn.get('arguments', '')}")
        return "\x00".join(parts)

    @cached_property
    def tool_names(self) -> frozenset[str]:
        names = set()
        for t in self.body.get("tools") or ():
            if isinstance(t, dict):
                fn = t.get("function") if isinstance(t.get("function"), dict) else t
                if fn.get("name"):
                    names.add(fn["name"])
        return frozenset(names)

    @cached_property
    def key(self) -> str:
        """Identity of the conversation for `times`: its system prompt and its first user message."""
        return hashlib.sha1(f"{self.system_text}\x00{self.first_user}".encode()).hexdigest()[:16]

    def prompt_chars(self) -> int:
        """Characters of the compact JSON of messages (+ tools when given): the basis of prompt_tokens."""
        n = len(json.dumps(self.body.get("messages") or [], ensure_ascii=False, separators=(",", ":")))
        if self.body.get("tools"):
            n += len(json.dumps(self.body["tools"], ensure_ascii=False, separators=(",", ":")))
        return n


def _all_in(subs: list[str] | None, text: str) -> bool:
    return subs is None or all(s in text for s in subs)


def _none_in(subs: list[str] | None, text: str) -> bool:
    return subs is None or not any(s in text for s in subs)


def conditions_hold(rule: CompiledRule, conv: Conversation) -> tuple[bool, Any]:
    """(holds, regex match) for the rule's `match` block; cheap checks first."""
    m = rule.match
    if m.model is not None and not any(conv.model == p or fnmatch.fnmatchcase(conv.model, p) for p in m.model):
        return False, None
    if m.turn is not None or m.turn_min is not None or m.turn_max is not None:
        t = conv.turn
        if (m.turn is not None and t != m.turn) or (m.turn_min is not None and t < m.turn_min):
            return False, None
        if m.turn_max is not None and t > m.turn_max:
            return False, None
    if m.tools_include is not None and not all(n in conv.tool_names for n in m.tools_include):
        return False, None
    if m.tools_exclude is not None and any(n in conv.tool_names for n in m.tools_exclude):
        return False, None
    if m.system_contains is not None or m.system_not_contains is not None:
        if not (_all_in(m.system_contains, conv.system_text) and _none_in(m.system_not_contains, conv.system_text)):
            return False, None
    if m.first_user_contains is not None and not _all_in(m.first_user_contains, conv.first_user):
        return False, None
    if m.last_user_contains is not None and not _all_in(m.last_user_contains, conv.last_user):
        return False, None
    if m.messages_contain is not None or m.messages_not_contain is not None:
        if not (_all_in(m.messages_contain, conv.all_text) and _none_in(m.messages_not_contain, conv.all_text)):
            return False, None
    found = None
    if m.last_tool_result_contains is not None or m.last_tool_result_regex is not None:
        last = conv.last_tool_result
        if last is None or not _all_in(m.last_tool_result_contains, last):
            return False, None
        if rule.regex is not None:
            found = rule.regex.search(last)
            if found is None:
                return False, None
    if m.last_tool_result_not_contains is not None:
        if not _none_in(m.last_tool_result_not_contains, conv.last_tool_result or ""):
            return False, None
    return True, found


def _groups(found: Any) -> dict[Any, Any]:
    if found is None:
        return {}
    groups: dict[Any, Any] = {0: found.group(0)}
    groups.update({i + 1: g for i, g in enumerate(found.groups())})
    groups.update(found.groupdict())
    return groups


@dataclass
class Answer:
    """What the server should do for one request: fault and/or message, already rendered."""

    label: str
    latency_sec: float
    fault: Fault | None
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[tuple[str, str, str]] = field(default_factory=list)  # (id, name, arguments)
    finish_reason: str = "stop"
    usage: dict[str, int] = field(default_factory=dict)


class Responder:
    """Thread-safe: `times` counters and hit counts are guarded by one lock."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.compiled: CompiledPolicy = policy.compiled()
        self._lock = threading.Lock()
        self._fired: dict[tuple[int, str], int] = {}
        self.hits: dict[str, int] = {}
        self.chaos_counts: dict[str, int] = {}
        self.answers = 0
        self._chaos_rng = random.Random(policy.chaos.seed if policy.chaos else 0)
        self._chaos_phase = 0.0

    def reset(self) -> None:
        with self._lock:
            self._fired.clear()
            self.hits.clear()
            self.chaos_counts.clear()
            self.answers = 0

    def _chaos_kind(self) -> str | None:
        """The fault kind replacing this answer, or None (seeded; kinds in turn)."""
        chaos = self.policy.chaos
        with self._lock:
            self.answers += 1
            if chaos is None or not chaos.kinds:
                return None
            # exactly `rate` of the answers (to within one), at seeded places: a jittered stride
            if self.answers == 1:
                self._chaos_phase = self._chaos_rng.random()
            n, phase = self.answers, self._chaos_phase
            if int(n * chaos.rate + phase) == int((n - 1) * chaos.rate + phase):
                return None
            kind = chaos.kinds[sum(self.chaos_counts.values()) % len(chaos.kinds)]
            self.chaos_counts[kind] = self.chaos_counts.get(kind, 0) + 1
            return kind

    def _chaotic(self, kind: str, ans: Answer, body: dict[str, Any]) -> Answer:
        chaos = self.policy.chaos
        ans.label = f"chaos:{kind}"
        if kind in ("http_429", "http_500"):
            ans.fault = Fault(status=int(kind[-3:]), retry_after=0 if kind == "http_429" else None)
        elif kind == "timeout":
            ans.fault = Fault(hang_sec=chaos.hang_sec)
        elif kind == "malformed_tool_args":
            names = [t.get("function", {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
            name = ans.tool_calls[0][1] if ans.tool_calls else next((n for n in names if n), "tool")
            ans.tool_calls = [(f"call_chaos_{self.answers}", name, '{"command": "ls", "path": ')]
            ans.content, ans.finish_reason = None, "tool_calls"
        else:
            ans.content = "" if kind == "empty_reply" else chaos.prose
            ans.tool_calls, ans.finish_reason = [], "stop"
        return ans

    def _select(self, conv: Conversation) -> tuple[CompiledResponse, Any]:
        for rule in self.compiled.rules:
            ok, found = conditions_hold(rule, conv)
            if not ok:
                continue
            if rule.times is None:
                return rule, found
            key = (rule.index, "" if rule.scope == "global" else conv.key)
            with self._lock:
                used = self._fired.get(key, 0)
                if used < rule.times:
                    self._fired[key] = used + 1
                    return rule, found
        return self.compiled.default, None

    def answer(self, body: dict[str, Any]) -> Answer:
        kind = self._chaos_kind()
        ans = self._answer(body)
        return self._chaotic(kind, ans, body) if kind else ans

    def _answer(self, body: dict[str, Any]) -> Answer:
        conv = Conversation(body)
        resp, found = self._select(conv)
        with self._lock:
            self.hits[resp.label] = self.hits.get(resp.label, 0) + 1
        fault = resp.fault
        ans = Answer(label=resp.label, latency_sec=resp.latency_sec, fault=fault)
        if fault is not None and fault.hang_sec is None:
            if fault.context_length:
                ans.usage = {"prompt_tokens": _ceil4(conv.prompt_chars())}
            return ans  # a pure fault needs no message
        ctx = {
            "turn": conv.turn,
            "instruction": conv.first_user,
            "last_tool_result": conv.last_tool_result or "",
            "match": _groups(found),
            "model": conv.model,
        }
        ans.content = resp.reply.render(ctx) if resp.reply is not None else None
        ans.reasoning = resp.reasoning.render(ctx) if resp.reasoning is not None else None
        ans.tool_calls = [
            (f"call_{conv.turn}_{i}", tc.name, tc.arguments(ctx)) for i, tc in enumerate(resp.tool_calls)
        ]
        if ans.content is None and not ans.tool_calls:
            ans.content = ""
        ans.finish_reason = resp.finish_reason or ("tool_calls" if ans.tool_calls else "stop")
        out_chars = len(ans.content or "") + sum(len(a) for _, _, a in ans.tool_calls)
        reasoning = _ceil4(len(ans.reasoning)) if ans.reasoning else 0
        usage = {
            "prompt_tokens": _ceil4(conv.prompt_chars()),
            "completion_tokens": _ceil4(out_chars) + reasoning,
            "cached_tokens": 0,
            "reasoning_tokens": reasoning,
        }
        usage.update(resp.usage)
        ans.usage = usage
        return ans
