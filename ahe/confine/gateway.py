"""The model gateway: the host side of every model call a confined session makes.

It holds the client (and so the keys, which never enter a worker), which applies retries and
timeouts; it counts tokens, cost and calls for the trial, refuses calls past the trial's
budget, and records every request and response in `conversation.jsonl` beside the trial. The
trial's usage and conversation are what the gateway saw, whatever the worker claims.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ahe.confine.wire import error
from ahe.errors import ContextLengthError, InfrastructureError
from ahe.llm.types import LLMSettings, ModelClient, Usage

CONVERSATION_FILE = "conversation.jsonl"
# What one session may put on the host's disk through the record: past it, calls are recorded
# without their messages, and refusals are counted but no longer written one by one.
RECORD_LIMIT_BYTES = 256 << 20
REFUSALS_RECORDED = 100


@dataclass(frozen=True)
class GatewayBudget:
    """Per trial; None = unbounded. A refused call ends the session as an infrastructure error
    of kind `budget` (the trial is not the agent's fault, but it is not retried forever either)."""

    max_requests: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    # the sampling settings a request may carry (the harness's declared llm blocks); empty = any.
    # Others are replaced by the first and recorded as refused: hooks cannot raise max_tokens.
    llm_settings: tuple[LLMSettings, ...] = ()


class ModelGateway:
    """One trial's gateway. `complete_request` answers one wire request; `usage` is the total."""

    def __init__(self, client: ModelClient, *, record_dir: Path | None = None,
                 budget: GatewayBudget | None = None, role: str = "agent") -> None:
        self.client, self.role = client, role
        self.budget = budget or GatewayBudget()
        self.usage = Usage()
        self.calls = self.failed_calls = 0
        self.refusals: list[str] = []
        self._record = open(Path(record_dir) / CONVERSATION_FILE, "a") if record_dir else None
        self._last: list[Any] = []  # the previous request's messages and tools (requests are deltas)
        self._tools: Any = None
        self._recorded: list[Any] = []
        self._recorded_tools: Any = None
        self._written = 0
        self.record_error: str | None = None  # set when the record cannot be written: no call is served after

    # ---------------------------------------------------------------- budget
    def _over_budget(self) -> str | None:
        b = self.budget
        if b.max_requests is not None and self.calls >= b.max_requests:
            return f"the trial's model budget of {b.max_requests} requests is spent"
        if b.max_tokens is not None and self.usage.total_tokens >= b.max_tokens:
            return f"the trial's model budget of {b.max_tokens} tokens is spent"
        if b.max_cost_usd is not None and (self.usage.cost_usd or 0.0) >= b.max_cost_usd:
            return f"the trial's model budget of ${b.max_cost_usd:g} is spent"
        return None

    def refuse(self, reason: str) -> None:
        """Count and record a request the gateway did not serve (the first REFUSALS_RECORDED)."""
        self.refusals.append(reason)
        if len(self.refusals) <= REFUSALS_RECORDED:
            self._write({"refused": reason})

    # ---------------------------------------------------------------- serving
    async def complete_request(self, req: dict[str, Any]) -> dict[str, Any]:
        """The wire answer ({"response", "events"} or {"error"}) to one `complete` request."""
        new, prefix = req.get("messages"), req.get("prefix", 0)
        tools = req["tools"] if "tools" in req else self._tools
        if not isinstance(new, list) or not all(isinstance(m, dict) for m in new) or \
                not (tools is None or isinstance(tools, list)) or not isinstance(prefix, int) or \
                not 0 <= prefix <= len(self._last):
            self.refuse("a complete request without a list of messages")
            return {"error": error("value", "complete needs messages: a list of objects, prefix: how many of the "
                                            "previous request's messages it repeats, tools: a list or null")}
        messages = self._last[:prefix] + new
        try:
            settings = LLMSettings.model_validate(req["settings"]) if req.get("settings") else None
        except ValidationError as exc:
            self.refuse("settings outside the llm block's schema")
            return {"error": error("value", f"settings: {exc.errors()[0]['msg']}")}
        allowed = self.budget.llm_settings
        if allowed and settings not in allowed:
            self.refuse("sampling settings other than the harness's llm blocks; the declared ones were used")
            settings = allowed[0]
        if self.record_error:
            return {"error": error("infra", self.record_error, kind="disk")}
        over = self._over_budget()
        if over:
            self.refuse(over)
            return {"error": error("infra", over, kind="budget")}
        self._last, self._tools = messages, tools
        events: list[tuple[str, dict[str, Any]]] = []
        t0 = time.monotonic()
        self.calls += 1
        number = self.calls  # calls may overlap (a CLI's side requests): each row keeps its own number
        try:
            resp = await self.client.complete(messages, tools=tools, settings=settings,
                                              on_event=lambda kind, data: events.append((kind, data)))
        except ContextLengthError as exc:
            self.failed_calls += 1
            self._write_call(number, messages, tools, None, str(exc), t0)
            return {"error": error("context_length", str(exc)), "events": events}
        except InfrastructureError as exc:
            self.failed_calls += 1
            self._write_call(number, messages, tools, None, str(exc), t0)
            return {"error": error("infra", str(exc), kind=exc.kind), "events": events}
        self.usage = self.usage.add(resp.usage)
        dumped = resp.model_dump(mode="json")  # once: the record and the wire carry the same object
        self._write_call(number, messages, tools, dumped, None, t0)
        if self.record_error:  # a call the trial's record cannot hold is not handed on (the disk is full)
            return {"error": error("infra", self.record_error, kind="disk"), "events": events}
        return {"response": dumped, "events": events}

    # ---------------------------------------------------------------- recording
    def _write_call(self, number: int, messages: list[Any], tools: list[Any] | None, response: dict | None,
                    err: str | None, t0: float) -> None:
        """One line per call: the messages new since the previous call (`prefix` = how many of
        the previous call's messages it repeats), the tools when they changed, the answer."""
        prefix = self._recorded_prefix(messages)
        self._recorded = messages
        row: dict[str, Any] = {"call": number, "prefix": prefix, "messages": messages[prefix:]}
        if tools is not self._recorded_tools:
            row["tools"] = self._recorded_tools = tools
        row["latency_sec"] = round(time.monotonic() - t0, 4)
        row["ts"] = round(time.time(), 3)  # when the answer came back (the rebuilt trajectory's timestamps)
        row["response" if err is None else "error"] = response if err is None else err
        self._write(row)

    def _recorded_prefix(self, messages: list[Any]) -> int:
        """How many leading messages the previous recorded call shares (same objects when the
        worker sent a delta, so this is mostly pointer comparisons)."""
        prefix = 0
        for old, new in zip(self._recorded, messages):
            if old is not new and old != new:
                break
            prefix += 1
        return prefix

    def _write(self, row: dict[str, Any]) -> None:
        if self._record is None:
            return
        line = json.dumps(row, ensure_ascii=False) + "\n"
        if self._written + len(line) > RECORD_LIMIT_BYTES and "call" in row:
            row = {k: v for k, v in row.items() if k not in ("messages", "tools")}
            row["omitted"] = f"the session's record passed {RECORD_LIMIT_BYTES >> 20} MB"
            line = json.dumps(row, ensure_ascii=False) + "\n"
        self._written += len(line)
        try:
            self._record.write(line)
            self._record.flush()
        except OSError as exc:  # e.g. a full disk: the session ends as an infra error, in one sentence
            self.record_error = f"the gateway cannot record this session's calls: {exc.strerror or exc}"
            try:
                self._record.close()
            except OSError:
                pass
            self._record = None

    def close(self) -> None:
        if len(self.refusals) > REFUSALS_RECORDED:
            self._write({"refused": f"{len(self.refusals) - REFUSALS_RECORDED} more refusals, not recorded one by one"})
        if self._record is not None:
            self._record.close()
            self._record = None


def read_conversation(path: Path) -> list[dict[str, Any]]:
    """The calls of a conversation.jsonl with each call's full message list rebuilt."""
    calls, last = [], []
    for line in Path(path).read_text().splitlines():
        row = json.loads(line)
        if "call" not in row:
            continue
        last = last[: row["prefix"]] + row.get("messages", [])  # past the record's limit: not kept
        calls.append({**row, "messages": last})
    return calls
