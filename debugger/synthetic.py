"""A synthetic iteration folder for benchmarks and tests: realistic rollouts, nothing run.

`make_iteration(out, tasks=89, trials=2, turns=40, seed=7)` writes `rollouts/<task>/trial-<n>/`
through the runtime's own `TrajectoryWriter` and `EventLog` — byte for byte what sessions
write — plus result.json per trial and results.json. Tool outputs mix what coding sessions
produce: build and test logs of 1–60 KB (log-normal, median ~4 KB), tracebacks, the same file
read again and again (exact repeats), progress bars rewritten with carriage returns, coloured
(ANSI) test output and base64 dumps. Deterministic for a seed. This is the input of
bench/bench_traces.py (docs/benchmarks.md) and of the debugger's tests.

    python -m debugger.synthetic OUT [--tasks 89] [--trials 2] [--turns 40]
"""

from __future__ import annotations

import base64
import random
import sys
from pathlib import Path
from typing import Any

WORDS = ("build step test module import error value file path config server request response parse token cache "
         "index write read open close start stop retry check compile link assert expected actual warning").split()


def _log(rng: random.Random, chars: int) -> str:
    lines, n = [], 0
    while n < chars:
        r = rng.random()
        if r < 0.1:
            ln = f"  File \"/app/src/{rng.choice(WORDS)}.py\", line {rng.randint(1, 900)}, in {rng.choice(WORDS)}"
        elif r < 0.2:
            ln = f"tests/test_{rng.choice(WORDS)}.py::test_{rng.choice(WORDS)}_{rng.randint(0, 99)} PASSED [{rng.randint(0, 100)}%]"
        else:
            ln = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 16)))
        lines.append(ln)
        n += len(ln) + 1
    return "\n".join(lines)


def tool_output(rng: random.Random, kind: str, size: int, repeated: str) -> str:
    if kind == "repeat":
        return repeated
    if kind == "ok":
        return f"exit code: 0\n{_log(rng, size)}"
    if kind == "error":
        return (f"exit code: 1\n{_log(rng, size // 2)}\n[stderr]\nTraceback (most recent call last):\n{_log(rng, size // 2)}\n"
                f"AssertionError: expected {rng.randint(0, 99)}, got {rng.randint(100, 999)}")
    if kind == "progress":
        bars = "".join(f"\rDownloading {rng.choice(WORDS)}: {i:3d}%|{'#' * (i // 4):<25}|" for i in range(0, 101))
        return f"exit code: 0\n{bars}\n{_log(rng, size // 2)}"
    if kind == "ansi":
        return "exit code: 0\n" + "\n".join(f"\x1b[1;32m{ln}\x1b[0m" for ln in _log(rng, size).split("\n"))
    if kind == "base64":
        return f"exit code: 0\n{base64.b64encode(rng.randbytes(size * 3 // 4)).decode()}\n"
    raise ValueError(kind)


KINDS = ["ok"] * 9 + ["error"] * 3 + ["repeat"] * 3 + ["progress", "ansi", "base64"]


def make_iteration(out: Path, *, tasks: int = 89, trials: int = 2, turns: int = 40, seed: int = 7) -> dict[str, Any]:
    """rollouts/<task>/trial-<n>/{trajectory.json, events.jsonl, result.json} via the runtime's writers."""
    from ahe.io import atomic_write_json
    from ahe.runtime.trace import EventLog, TrajectoryWriter

    rng = random.Random(seed)
    summary: dict[str, list[float]] = {}
    system = "You are a software engineer working alone in a terminal.\n" + _log(random.Random(1), 2500)
    raw = 0
    for i in range(tasks):
        task = f"task-{i:03d}"
        readme = f"exit code: 0\n{_log(random.Random(i), 9000)}"  # the file this task's agent keeps re-reading
        for n in range(1, trials + 1):
            d = out / "rollouts" / task / f"trial-{n}"
            w = TrajectoryWriter(d / "trajectory.json", session_id=f"{task}-{n}",
                                 agent={"name": "code-agent", "version": "ahe", "model_name": "mock"})
            ev = EventLog(d / "events.jsonl")
            w.add_step({"source": "system", "message": system})
            w.add_step({"source": "user", "message": f"Task {task}: " + _log(random.Random(task), 600)})
            for t in range(1, turns + 1):
                kind = rng.choice(KINDS)
                size = int(min(60_000, rng.lognormvariate(8.3, 0.9)))  # median ~4 KB, a long tail to 60 KB
                content = tool_output(rng, kind, size, readme)
                cmd = "cat /app/README.md" if kind == "repeat" else f"cd /app && {rng.choice(WORDS)} --{rng.choice(WORDS)} {t}"
                cid = f"call_{t}_0"
                w.add_step({"source": "agent", "model_name": "mock", "message": " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60))),
                            "tool_calls": [{"tool_call_id": cid, "function_name": "run_shell_command", "arguments": {"command": cmd}}],
                            "metrics": {"prompt_tokens": 900 * t, "completion_tokens": 60, "cached_tokens": 0,
                                        "extra": {"reasoning_tokens": 0, "latency_sec": 1.0, "attempts": 1}}})
                ev.emit("model_call", turn=t, latency_sec=1.0, attempts=1)
                w.update_last_step(observation={"results": [{"source_call_id": cid, "content": content,
                                                             "extra": {"tool": "run_shell_command", "is_error": kind == "error"}}]})
                ev.emit("tool_call", turn=t, id=cid, tool="run_shell_command", duration_sec=0.1, is_error=kind == "error")
            passed = rng.random() < 0.6
            w.add_step({"source": "agent", "model_name": "mock", "message": "Done." if passed else "I could not finish."})
            w.finish(final_metrics={"total_prompt_tokens": 900 * turns * (turns + 1) // 2, "total_completion_tokens": 60 * turns,
                                    "total_steps": len(w.steps)},
                     extra={"stop_reason": "no_tool_call", "final_answer": "Done.", "duration_sec": 60.0,
                            "tool_calls": turns, "tool_errors": 0})
            ev.emit("session_end", stop_reason="no_tool_call", turns=turns + 1)
            ev.close()
            atomic_write_json(d / "result.json", {"task": task, "trial": n, "attempt": 1, "reward": float(passed),
                                                  "raw_reward": float(passed), "passed": passed, "error_class": None,
                                                  "stop_reason": "no_tool_call", "turns": turns + 1, "tool_calls": turns,
                                                  "tool_errors": 0, "usage": {"prompt_tokens": 1000, "completion_tokens": 100},
                                                  "duration_sec": 60.0})
            raw += (d / "trajectory.json").stat().st_size
            summary.setdefault(task, []).append(float(passed))
    atomic_write_json(out / "results.json", {"k": trials, "tasks": {
        t: {"pass_rate": sum(r) / len(r), "trials": len(r), "passed": int(sum(r))} for t, r in summary.items()}})
    return {"raw_bytes": raw, "trials": tasks * trials}


if __name__ == "__main__":  # pragma: no cover - a helper for benchmarks
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--tasks", type=int, default=89)
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--turns", type=int, default=40)
    a = p.parse_args()
    made = make_iteration(a.out, tasks=a.tasks, trials=a.trials, turns=a.turns)
    print(f"{a.out}: {made['raw_bytes'] / 1e6:.1f} MB of trajectories", file=sys.stderr)
