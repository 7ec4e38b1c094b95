"""Recorded trials as the replay needs them: the conversation, each model turn, its tool calls.

Read from `iterations/NNN/rollouts/<task>/<trial>/trajectory.json` (ATIF, as the runtime
writes it) and `result.json` (whether the trial passed). Step numbers follow the debugger
corpus, so a step is named by the same file the debugger and the evolve agent read:
`corpus/<task>/<trial>/step-NNN.md`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ahe.llm.types import ModelResponse, ToolCall


@dataclass
class RecordedCall:
    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str
    parse_error: str | None
    content: str  # the observation the model saw
    is_error: bool
    metadata: dict[str, Any]
    key: str = ""  # the arguments as canonical JSON (compared and validated without re-encoding)


@dataclass
class RecordedTurn:
    step: int  # the ATIF step number (corpus numbering)
    n_messages: int  # how many messages preceded this model call
    content: str
    reasoning: str | None
    model: str | None
    calls: list[RecordedCall]
    _response: ModelResponse | None = None

    @property
    def response(self) -> ModelResponse:
        """The model reply as the runtime's type (built on first use: only model hooks need it)."""
        if self._response is None:
            self._response = ModelResponse(
                content=self.content, reasoning_content=self.reasoning, model=self.model,
                tool_calls=[ToolCall(id=c.id, name=c.name, raw_arguments=c.raw_arguments, arguments=c.arguments,
                                     parse_error=c.parse_error) for c in self.calls])
        return self._response


@dataclass
class RecordedTrial:
    task: str
    trial: str
    passed: bool | None
    messages: list[dict[str, Any]]
    turns: list[RecordedTurn]
    width: int  # digits of the corpus step names (step-NNN.md)
    first_step: int = 1
    errors: list[str] = field(default_factory=list)

    def ref(self, step: int) -> str:
        return f"corpus/{self.task}/{self.trial}/step-{step:0{self.width}d}.md"

    def tools_used(self) -> set[str]:
        return {c.name for t in self.turns for c in t.calls}


def _step_number(step: Any, index: int) -> int:
    sid = step.get("step_id") if isinstance(step, dict) else None
    return sid if sid.__class__ is int else index + 1  # the corpus's own rule


def _call(tc: dict[str, Any], results: dict[str, dict[str, Any]]) -> RecordedCall:
    cid = str(tc.get("tool_call_id") or "")
    args = tc.get("arguments")
    raw, parse_error = "", None
    if isinstance(args, dict) and set(args) == {"_raw"}:
        raw, parse_error, args = str(args["_raw"]), "arguments were not a JSON object", None
    elif not isinstance(args, dict):
        raw, parse_error, args = json.dumps(args), "arguments were not a JSON object", None
    key = json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
    raw = raw or key  # the trace keeps parsed arguments; their canonical JSON stands in for the model's text
    res = results.get(cid) or {}
    extra = dict(res.get("extra") or {})
    extra.pop("tool", None)
    is_error = bool(extra.pop("is_error", False))
    content = res.get("content")
    return RecordedCall(cid, str(tc.get("function_name") or ""), args, raw, parse_error,
                        content if isinstance(content, str) else json.dumps(content), is_error, extra, key)


def _assistant_message(text: str, calls: list[RecordedCall]) -> dict[str, Any]:
    """As `ModelResponse.assistant_message` builds it in a session."""
    msg: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        msg["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments}}
                             for c in calls]
    return msg


def parse_trajectory(task: str, trial: str, traj: dict[str, Any], passed: bool | None) -> RecordedTrial:
    steps = traj.get("steps")
    if not isinstance(steps, list):
        raise ValueError("no 'steps' list (not an ATIF trajectory)")
    numbers = [_step_number(s, i) for i, s in enumerate(steps)]
    width = max(3, len(str(max(numbers, default=1))))
    messages: list[dict[str, Any]] = []
    turns: list[RecordedTurn] = []
    for sid, step in zip(numbers, steps):
        if not isinstance(step, dict):
            continue
        source, text = step.get("source"), step.get("message")
        text = text if isinstance(text, str) else ("" if text is None else json.dumps(text))
        if source in ("system", "user"):
            messages.append({"role": source, "content": text})
            continue
        if source != "agent":
            continue
        obs = step.get("observation") or {}
        results = {str(r.get("source_call_id")): r for r in obs.get("results") or () if isinstance(r, dict)}
        calls = [_call(tc, results) for tc in step.get("tool_calls") or () if isinstance(tc, dict)]
        turns.append(RecordedTurn(sid, len(messages), text, step.get("reasoning_content"), step.get("model_name"), calls))
        messages.append(_assistant_message(text, calls))
        for c in calls:
            messages.append({"role": "tool", "tool_call_id": c.id, "content": c.content})
    return RecordedTrial(task, trial, passed, messages, turns, width)


def load_trial(task: str, trial_dir: Path) -> RecordedTrial:
    passed = None
    try:
        passed = json.loads((trial_dir / "result.json").read_text(encoding="utf-8")).get("passed")
    except (OSError, ValueError, AttributeError):
        pass
    traj = json.loads((trial_dir / "trajectory.json").read_bytes())
    return parse_trajectory(task, trial_dir.name, traj, passed)


def load_round(iteration_dir: Path) -> tuple[list[RecordedTrial], list[str]]:
    """Every recorded trial of an iteration, in task and trial order; unreadable ones are listed."""
    from debugger.render import natural_key

    root = Path(iteration_dir) / "rollouts"
    trials: list[RecordedTrial] = []
    errors: list[str] = []
    if not root.is_dir():
        return trials, [f"{root}: no recorded rollouts"]
    for task_dir in sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")):
        for trial_dir in sorted((d for d in task_dir.iterdir() if (d / "trajectory.json").is_file()),
                                key=lambda d: natural_key(d.name)):
            try:
                trials.append(load_trial(task_dir.name, trial_dir))
            except (OSError, ValueError) as exc:
                errors.append(f"{task_dir.name}/{trial_dir.name}: {type(exc).__name__}: {exc}"[:300])
    return trials, errors
