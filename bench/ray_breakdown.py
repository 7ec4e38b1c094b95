"""Where the wall time of an efficiency run goes, trial by trial (bench_ray.py).

Each trial's wall, from the executor's `start` event to its `end` event on the driver, is cut
into parts read from the trial's own files (result.json, events.jsonl) and the driver's
clock (one machine, so one clock):

- dispatch: driver `start` → the trial begins in its executor (`started_at`): queueing in
  the driver, the call reaching the node's runner, fetching the cached folders;
- sandbox: the trial's time outside the agent and the verifier (sandbox start, task setup,
  stop, writing the trial's files);
- model wait beyond the latency: the model calls' measured latency minus the mock's fixed
  latency (HTTP, the server and the client under load);
- tools: the shell commands in the sandbox;
- agent loop: the agent's time that is neither a model call nor a tool;
- verifier;
- return: the trial's end in its executor → the driver's `end` event (packing, shipping the
  folder back, the driver writing it; for local runs, writing only).

The run's wall also holds what comes before the first trial starts and after the last one
ends (`run_rollouts` preparing and writing results.json): "outside the trials".
"""

from __future__ import annotations

import json
import statistics
from datetime import datetime
from pathlib import Path
from typing import Any

PARTS = ["dispatch", "sandbox", "model wait beyond latency", "tools", "agent loop", "verifier", "return"]


def trial_parts(trial_dir: Path, start: float, end: float, latency: float) -> dict[str, float]:
    res = json.loads((trial_dir / "result.json").read_text())
    events = [json.loads(x) for x in (trial_dir / "events.jsonl").read_text().splitlines() if x.strip()]
    calls = [e["latency_sec"] for e in events if e.get("type") == "model_call"]
    tools = sum(e.get("duration_sec", 0.0) for e in events if e.get("type") == "tool_call")
    began = datetime.fromisoformat(res["started_at"]).timestamp()
    agent, verifier = res["agent_duration_sec"] or 0.0, res["verifier_duration_sec"] or 0.0
    return {
        "wall": end - start,
        "dispatch": began - start,
        "sandbox": res["duration_sec"] - agent - verifier,
        "model wait beyond latency": sum(calls) - latency * len(calls),
        "tools": tools,
        "agent loop": agent - sum(calls) - tools,
        "verifier": verifier,
        "return": end - (began + res["duration_sec"]),
    }


def breakdown(out: Path, times: dict[str, list[float]], wall: float, latency: float, t0: float) -> dict[str, Any]:
    """Per part: median over trials and the value in the slowest trial; plus the run's own edges.

    `times` maps "task/trial" to [driver start, driver end] (time.time()); `t0` is when the
    run was started.
    """
    rows = {}
    for key, (start, end) in times.items():
        task, trial = key.rsplit("/", 1)
        rows[key] = trial_parts(out / "rollouts" / task / f"trial-{trial}", start, end, latency)
    slowest = max(rows.values(), key=lambda r: r["wall"])
    first_start = min(s for s, _ in times.values())
    last_end = max(e for _, e in times.values())
    return {
        "median": {p: round(statistics.median(r[p] for r in rows.values()), 3) for p in ["wall", *PARTS]},
        "slowest": {p: round(slowest[p], 3) for p in ["wall", *PARTS]},
        "before_first_start": round(first_start - t0, 3),
        "first_to_last_start": round(max(s for s, _ in times.values()) - first_start, 3),
        "after_last_end": round(t0 + wall - last_end, 3),
    }


def render(name: str, m: int, b: dict[str, Any]) -> list[list[str]]:
    """Table rows: one per part, median and slowest trial, in seconds."""
    rows = [[f"{name} @ {m}", p, f"{b['median'][p]:.2f}", f"{b['slowest'][p]:.2f}"] for p in ["wall", *PARTS]]
    rows.append([f"{name} @ {m}", "run: before the first start / spread of starts / after the last end",
                 f"{b['before_first_start']:.2f} / {b['first_to_last_start']:.2f} / {b['after_last_end']:.2f}", ""])
    return rows
