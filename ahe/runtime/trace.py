"""Traces: an ATIF-compatible trajectory.json and a raw events.jsonl per session.

The trajectory is written incrementally and stays valid JSON after every step, so a session
killed at any moment leaves a readable file: the steps are kept as a JSON array followed by
a fixed closing tail, and each new step overwrites only that tail (one write call). When the
session ends the whole file is rewritten atomically with its final metrics.
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ahe.io import atomic_write_json

ATIF_VERSION = "ATIF-v1.4"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str)


_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _write_all(fd: int, data: bytes, offset: int | None = None) -> None:
    """One write (or pwrite at `offset`) in the common case; loops on a short write."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view) if offset is None else os.pwrite(fd, view, offset)
        view = view[n:]
        if offset is not None:
            offset += n


class EventLog:
    """Append-only JSON lines; one line per runtime event, written as it happens.

    Each line goes to the kernel in one `write` on an O_APPEND descriptor (no user-space
    buffer to flush), so a killed process loses no event that was emitted.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._fd: int | None = None
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _O_CLOEXEC, 0o644)

    def emit(self, type_: str, **data: Any) -> None:
        if self._fd is None:
            return
        line = (_dumps({"ts": round(time.time(), 4), "type": type_, **data}) + "\n").encode("utf-8")
        with self._lock:
            if self._fd is not None:
                _write_all(self._fd, line)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class TrajectoryWriter:
    """ATIF trajectory kept valid on disk after every step.

    Every update is one positioned write (`os.pwrite`) of the changed step and the closing
    tail; the file is truncated only in the rare case that it got shorter.
    """

    def __init__(self, path: Path | None, *, session_id: str, agent: dict[str, Any]) -> None:
        self.path = path
        self.header = {"schema_version": ATIF_VERSION, "session_id": session_id, "agent": agent}
        self.steps: list[dict[str, Any]] = []
        self._fd: int | None = None
        self._size = 0  # bytes in the file
        self._steps_end = 0  # file offset where the closing tail starts
        self._last_start = 0  # file offset where the last step starts
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            head = (_dumps(self.header)[:-1] + ', "steps": [').encode("utf-8")
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | _O_CLOEXEC, 0o644)
            self._steps_end = self._last_start = len(head)
            self._write_at(0, head + self._TAIL_BYTES)

    _TAIL = '\n], "extra": {"complete": false}}\n'
    _TAIL_BYTES = _TAIL.encode("utf-8")

    def _write_at(self, offset: int, data: bytes) -> None:
        assert self._fd is not None
        _write_all(self._fd, data, offset)
        end = offset + len(data)
        if end < self._size:
            os.ftruncate(self._fd, end)
        self._size = end

    def _write_tail(self, offset: int, chunk: bytes = b"") -> None:
        self._write_at(offset, chunk + self._TAIL_BYTES)

    def add_step(self, step: dict[str, Any]) -> int:
        """Append a step (step_id assigned here); returns its step_id."""
        step = {"step_id": len(self.steps) + 1, "timestamp": now_iso(), **step}
        self.steps.append(step)
        if self._fd is not None:
            sep = "," if len(self.steps) > 1 else ""
            self._last_start = self._steps_end
            chunk = (sep + "\n" + _dumps(step)).encode("utf-8")
            self._write_tail(self._steps_end, chunk)
            self._steps_end = self._last_start + len(chunk)
        return step["step_id"]

    def update_last_step(self, **fields: Any) -> None:
        """Add fields (e.g. the observation) to the most recent step."""
        if not self.steps:
            return
        self.steps[-1].update(fields)
        if self._fd is not None:
            sep = "," if len(self.steps) > 1 else ""
            chunk = (sep + "\n" + _dumps(self.steps[-1])).encode("utf-8")
            self._write_tail(self._last_start, chunk)
            self._steps_end = self._last_start + len(chunk)

    def finish(self, *, final_metrics: dict[str, Any], extra: dict[str, Any]) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self.path is not None:
            data = {**self.header, "steps": self.steps, "final_metrics": final_metrics, "extra": {"complete": True, **extra}}
            atomic_write_json(self.path, data)

def agent_step(r: Any) -> dict[str, Any]:
    """The ATIF step of one model response (an `ahe.llm.types.ModelResponse`)."""
    step: dict[str, Any] = {"source": "agent", "model_name": r.model, "message": r.content or ""}
    if r.reasoning_content:
        step["reasoning_content"] = r.reasoning_content
    if r.tool_calls:
        step["tool_calls"] = [
            {
                "tool_call_id": tc.id,
                "function_name": tc.name,
                "arguments": tc.arguments if tc.arguments is not None else {"_raw": tc.raw_arguments},
            }
            for tc in r.tool_calls
        ]
    metrics: dict[str, Any] = {
        "prompt_tokens": r.usage.prompt_tokens,
        "completion_tokens": r.usage.completion_tokens,
        "cached_tokens": r.usage.cached_tokens,
        "extra": {"reasoning_tokens": r.usage.reasoning_tokens, "latency_sec": round(r.latency_sec, 4), "attempts": r.attempts},
    }
    if r.usage.cost_usd is not None:
        metrics["cost_usd"] = r.usage.cost_usd
    step["metrics"] = metrics
    return step
