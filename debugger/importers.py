"""Traces made elsewhere, turned into an iteration folder the debug phase can read.

`import_traces(src, fmt, out)` reads every trace file under `src` and writes
`out/rollouts/<task>/<trial>/trajectory.json` (ATIF v1.4), plus a `result.json` when the
trace (or a file beside it) says what it scored. The rest of the phase then runs exactly as
for AHE's own rollouts. Formats:

- `atif`: ATIF trajectory files (Harbor, AHE): a JSON object with a `steps` list.
- `nexau`: the NexAU in-memory tracer dump (`InMemoryTracer.dump_traces()`): a JSON list of
  root spans, each `{id, name, type: AGENT|SUB_AGENT|LLM|TOOL|..., inputs, outputs,
  attributes, error, start_time, end_time, children: [...]}`. Each root span is one run.
- `openai`: a plain chat-completions message list (`[{role, content, tool_calls?}, ...]`),
  as a JSON list, an object `{"messages": [...]}` or JSON lines (one message per line).

Where a trace lands (documented in docs/debugger.md): `DIR/<name>.json` is task `<name>`,
trial `trial-1`; `DIR/<task>/<name>.json` is trial `<name>` of `<task>`; deeper files take
the first folder as the task and the second as the trial (Harbor's `<task>__<id>` folders
split at `__`). A file named trajectory.json (or trace/messages.json) takes its folder's name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ahe.errors import AheError
from ahe.runtime.trace import ATIF_VERSION
from ahe.io import atomic_write_json
from debugger.nexau import nexau_to_atif, tool_arguments
from debugger.render import content_text, safe_name

FORMATS = ("atif", "nexau", "openai")
GENERIC = {"trajectory", "trace", "traces", "messages", "conversation", "dump", "spans"}
SIDECAR_SKIP = {"result", "results", "events", "import", "config", "metadata"}


def _place(src: Path, f: Path) -> tuple[str, str]:
    """(task, trial) of a trace file from where it sits under `src`."""
    rel = f.relative_to(src).parts
    stem = f.name.split(".")[0]
    generic = stem.lower() in GENERIC
    if len(rel) == 1:
        return safe_name(src.name if generic else stem), "trial-1"
    if len(rel) == 2:
        if "__" in rel[0]:
            task, _, trial = rel[0].partition("__")
            return safe_name(task), safe_name(trial if generic else f"{trial}-{stem}")
        return safe_name(rel[0]), ("trial-1" if generic else safe_name(stem))
    first = rel[0]
    if "__" in first:
        task, _, trial = first.partition("__")
        return safe_name(task), safe_name(trial)
    return safe_name(first), safe_name(rel[1])


def _files(src: Path, fmt: str) -> list[Path]:
    exts = (".json", ".jsonl") if fmt == "openai" else (".json",)
    out = []
    for f in sorted(src.rglob("*")):
        if not f.is_file() or not f.name.endswith(exts) or f.name.startswith("."):
            continue
        stem = f.name.split(".")[0].lower()
        if stem in SIDECAR_SKIP or f.name.endswith(".result.json"):
            continue
        out.append(f)
    return out


# ------------------------------------------------------------------ rewards

def reward_of(data: Any) -> float | None:
    """A reward from the shapes traces and result files use: reward, passed, rewards.reward, verifier_result."""
    if not isinstance(data, dict):
        return None
    for key in ("reward", "score"):
        v = data.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    if isinstance(data.get("passed"), bool):
        return 1.0 if data["passed"] else 0.0
    for key in ("rewards", "verifier_result", "metadata", "extra", "result"):
        sub = reward_of(data.get(key))
        if sub is not None:
            return sub
    return None


def _sidecar_reward(f: Path) -> float | None:
    candidates = [f.with_name(f.name.split(".")[0] + ".result.json"), f.parent / "result.json", f.parent.parent / "result.json"]
    for c in candidates:
        if c.is_file() and c != f:
            try:
                r = reward_of(json.loads(c.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue
            if r is not None:
                return r
    return None


# ------------------------------------------------------------------ OpenAI message lists


def openai_to_atif(messages: list[dict[str, Any]], *, name: str = "openai") -> dict[str, Any]:
    """Chat-completions messages as an ATIF trajectory (tool messages become observations)."""
    steps: list[dict[str, Any]] = []
    calls_at: dict[str, dict[str, Any]] = {}
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        text, _ = content_text(m.get("content"))
        if role in ("system", "developer"):
            steps.append({"step_id": len(steps) + 1, "source": "system", "message": text})
        elif role == "user":
            steps.append({"step_id": len(steps) + 1, "source": "user", "message": text})
        elif role == "assistant":
            step: dict[str, Any] = {"step_id": len(steps) + 1, "source": "agent", "message": text}
            reasoning = m.get("reasoning_content") or m.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                step["reasoning_content"] = reasoning
            calls = []
            for i, tc in enumerate(m.get("tool_calls") or ()):
                fn = (tc.get("function") if isinstance(tc, dict) else None) or {}
                cid = str((tc or {}).get("id") or f"call_{len(steps) + 1}_{i}")
                calls.append({"tool_call_id": cid, "function_name": str(fn.get("name") or "?"), "arguments": tool_arguments(fn.get("arguments"))})
            if isinstance(m.get("function_call"), dict):  # the legacy single-function form
                fc = m["function_call"]
                calls.append({"tool_call_id": f"call_{len(steps) + 1}_fn", "function_name": str(fc.get("name") or "?"),
                              "arguments": tool_arguments(fc.get("arguments"))})
            if calls:
                step["tool_calls"] = calls
                for c in calls:
                    calls_at[c["tool_call_id"]] = step
            steps.append(step)
        elif role in ("tool", "function"):
            cid = m.get("tool_call_id")
            step = calls_at.get(cid) if cid else None
            if step is None:  # legacy function role, or an unknown id: the latest agent step
                step = next((s for s in reversed(steps) if s["source"] == "agent"), None)
                if step is None:
                    step = {"step_id": len(steps) + 1, "source": "agent", "message": ""}
                    steps.append(step)
                if cid is None:
                    cid = next((c["tool_call_id"] for c in step.get("tool_calls", ())
                                if c["tool_call_id"] not in {r["source_call_id"] for r in step.get("observation", {}).get("results", [])}), None)
            tool = next((c["function_name"] for c in step.get("tool_calls", ()) if c["tool_call_id"] == cid), m.get("name") or "?")
            step.setdefault("observation", {"results": []})["results"].append(
                {"source_call_id": cid, "content": text, "extra": {"tool": tool, "is_error": False}})
    final = next((s["message"] for s in reversed(steps) if s["source"] == "agent" and not s.get("tool_calls")), None)
    return {"schema_version": ATIF_VERSION, "session_id": name, "agent": {"name": "imported", "version": "openai-messages"},
            "steps": steps, "extra": {"complete": True, "final_answer": final, "imported_from": "openai"}}


def _openai_messages(f: Path) -> tuple[list[dict[str, Any]], float | None]:
    text = f.read_text(encoding="utf-8")
    if f.name.endswith(".jsonl"):
        msgs = [json.loads(line) for line in text.splitlines() if line.strip()]
        return msgs, None
    data = json.loads(text)
    if isinstance(data, list):
        return data, None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return data["messages"], reward_of(data)
    raise ValueError("not a message list (a JSON list, {\"messages\": [...]} or JSON lines)")


# ------------------------------------------------------------------ the import

def _convert(f: Path, fmt: str) -> list[tuple[dict[str, Any], float | None]]:
    """[(ATIF trajectory, reward or None)] from one file."""
    if fmt == "atif":
        data = json.loads(f.read_text(encoding="utf-8"))
        if not (isinstance(data, dict) and isinstance(data.get("steps"), list)):
            raise ValueError("not an ATIF trajectory (no 'steps' list)")
        return [(data, reward_of(data.get("extra")) if isinstance(data.get("extra"), dict) else None)]
    if fmt == "openai":
        msgs, reward = _openai_messages(f)
        return [(openai_to_atif(msgs, name=f.stem), reward)]
    data = json.loads(f.read_text(encoding="utf-8"))
    roots = data if isinstance(data, list) else (data.get("traces") or data.get("spans") or [data]) if isinstance(data, dict) else []
    roots = [r for r in roots if isinstance(r, dict)]
    if not roots:
        raise ValueError("no spans (a NexAU dump is a JSON list of root spans)")
    out = []
    for r in roots:
        traj, subs = nexau_to_atif(r)
        traj.setdefault("extra", {})["sub_agent_trajectories"] = subs
        out.append((traj, reward_of(r.get("attributes")) if reward_of(r.get("outputs")) is None else reward_of(r.get("outputs"))))
    return out


def _write_subs(folder: Path, subs: list[tuple[str, dict[str, Any], list]]) -> None:
    for k, (name, traj, nested) in enumerate(subs, 1):
        d = folder / "sub_agents" / f"{k:02d}-{safe_name(name)}"
        atomic_write_json(d / "trajectory.json", traj)
        _write_subs(d, nested)


def import_traces(src: Path, fmt: str, out: Path) -> dict[str, Any]:
    """Write `out/rollouts/...` from the traces under `src`; returns the manifest (also out/import.json)."""
    src, out = Path(src), Path(out)
    if fmt not in FORMATS:
        raise AheError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if not src.exists():
        raise AheError(f"--traces {src}: no such file or folder")
    files = [src] if src.is_file() else _files(src, fmt)
    base = src.parent if src.is_file() else src
    if not files:
        raise AheError(f"--traces {src}: no {fmt} trace files (*.json{', *.jsonl' if fmt == 'openai' else ''}) found")
    used: set[tuple[str, str]] = set()
    entries, errors = [], []
    for f in files:
        task, trial = _place(base, f)
        try:
            converted = _convert(f, fmt)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            errors.append(f"{f}: {type(exc).__name__}: {exc}"[:300])
            continue
        sidecar = _sidecar_reward(f)
        for i, (traj, reward) in enumerate(converted, 1):
            name = trial if len(converted) == 1 else (f"trial-{i}" if trial == "trial-1" else f"{trial}-{i}")
            n, unique = 2, name
            while (task, unique) in used:
                unique, n = f"{name}-{n}", n + 1
            used.add((task, unique))
            tdir = out / "rollouts" / task / unique
            subs = (traj.get("extra") or {}).pop("sub_agent_trajectories", None) or []
            atomic_write_json(tdir / "trajectory.json", traj)
            _write_subs(tdir, subs)
            reward = reward if reward is not None else sidecar
            if reward is not None:
                extra = traj.get("extra") if isinstance(traj.get("extra"), dict) else {}
                atomic_write_json(tdir / "result.json", {
                    "task": task, "trial": unique, "reward": 1.0 if reward >= 1.0 else 0.0, "raw_reward": reward,
                    "passed": reward >= 1.0, "error_class": None, "stop_reason": extra.get("stop_reason"),
                    "imported_from": {"format": fmt, "file": str(f)}})
            entries.append({"file": str(f), "task": task, "trial": unique, "reward": reward, "steps": len(traj.get("steps") or [])})
    if not entries:
        raise AheError(f"--traces {src}: none of the {len(files)} file(s) could be read as {fmt}: " + "; ".join(errors[:3]))
    manifest = {"format": fmt, "source": str(src), "traces": entries, "errors": errors}
    atomic_write_json(out / "import.json", manifest)
    return manifest
