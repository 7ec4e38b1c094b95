"""Benchmark 4 — trace processing: cleaning and corpus building, MB/s and tokens in vs out.

    python bench/bench_traces.py                      # 89 tasks × 2 trials × 40 turns (~50 MB of trajectories), 3 repeats
    python bench/bench_traces.py --tasks 3 --turns 5 --repeat 1          # smoke size

The synthetic iteration is made here, independently of the debugger's own generator, and
written through the runtime's `TrajectoryWriter` and `EventLog` — byte for byte what real
sessions write (incrementally kept-valid JSON, then the final atomic rewrite). Tool outputs
mix what coding sessions produce: build and test logs of 1–60 KB (some far over the
cleaner's 6,000-character cut), tracebacks, the same file read again and again (exact
repeats), progress bars rewritten with carriage returns, coloured (ANSI) test output, and
base64 dumps. Deterministic for a seed.

Measured, each as MB of trajectory.json per second of wall time:
  clean         `debugger.Cleaner.clean` over every text of every step (messages, tool-call
                arguments, tool outputs), in one process, JSON parsing excluded
  read+clean    the same including reading and parsing each trajectory.json
  corpus        `debugger.build_corpus(iteration_dir)` — the whole corpus: one file per step,
                indexes, divergence notes (with its default worker processes: one per core),
  corpus (1 worker)   the same in this process only
and the tokens (4 characters each, the runtime's estimate) of the raw traces vs the corpus.
When `debugger` does not (yet) expose `build_corpus` or `Cleaner`, that line says so.

The corpus is one file per step, so its speed depends on how fast the file system creates
files: the iteration is built in the temporary folder (on disk) and, when /dev/shm exists,
also on tmpfs, and a probe reports the disk's cost of creating one small file.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, median, table, write_result  # noqa: E402

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


def make_iteration(out: Path, *, tasks: int, trials: int, turns: int, seed: int = 7) -> dict[str, Any]:
    """rollouts/<task>/trial-<n>/{trajectory.json, events.jsonl, result.json} via the runtime's writers."""
    from ahe.runtime.trace import EventLog, TrajectoryWriter
    from ahe.io import atomic_write_json

    rng = random.Random(seed)
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
    return {"raw_bytes": raw, "trials": tasks * trials}


def _texts(traj: dict[str, Any]) -> list[str]:
    out = []
    for s in traj.get("steps", []):
        if s.get("message"):
            out.append(s["message"])
        for tc in s.get("tool_calls") or ():
            out.append(json.dumps(tc.get("arguments"), ensure_ascii=False))
        for r in (s.get("observation") or {}).get("results", ()):
            if isinstance(r.get("content"), str):
                out.append(r["content"])
    return out


def bench_clean(it_dir: Path) -> dict[str, Any]:
    try:
        from debugger import Cleaner
    except (ImportError, AttributeError) as exc:
        return {"available": False, "why": f"debugger.Cleaner not available: {exc}"}
    files = sorted((it_dir / "rollouts").glob("*/*/trajectory.json"))
    raw = sum(f.stat().st_size for f in files)
    # read+clean
    t0 = time.perf_counter()
    texts_by_task: dict[str, list[str]] = {}
    for f in files:
        texts_by_task.setdefault(f.parent.parent.name, []).extend(_texts(json.loads(f.read_text(encoding="utf-8"))))
    t_read = time.perf_counter() - t0
    chars_in = chars_out = 0
    t0 = time.perf_counter()
    for task, texts in texts_by_task.items():
        c = Cleaner()
        for i, text in enumerate(texts):
            cl = c.clean(text, ref=f"corpus/{task}/x/step-{i:03d}.md", raw_pointer="rollouts/x/trajectory.json")
            chars_in += len(text)
            chars_out += len(cl.text)
    t_clean = time.perf_counter() - t0
    return {"available": True, "raw_bytes": raw, "clean_sec": t_clean, "read_sec": t_read,
            "clean_mb_s": raw / 1e6 / t_clean, "read_clean_mb_s": raw / 1e6 / (t_clean + t_read),
            "text_chars_in": chars_in, "text_chars_out": chars_out}


def bench_corpus(it_dir: Path, workers: int | None) -> dict[str, Any]:
    try:
        from debugger import build_corpus
    except (ImportError, AttributeError) as exc:
        return {"available": False, "why": f"debugger.build_corpus not available yet: {exc}"}
    # a first build each time: the previous corpus is removed first (untimed), or build_corpus
    # would delete it in the background while the measured build runs
    shutil.rmtree(it_dir / "corpus", ignore_errors=True)
    t0 = time.perf_counter()
    b = build_corpus(it_dir, workers=workers)
    wall = time.perf_counter() - t0
    return {"available": True, "raw_bytes": b.raw_bytes, "corpus_bytes": b.corpus_bytes, "files": b.files, "steps": b.steps,
            "workers": b.workers, "sec": wall, "mb_s": b.raw_bytes / 1e6 / wall, "raw_tokens": b.raw_bytes // 4,
            "corpus_tokens": b.corpus_bytes // 4, "errors": b.errors[:5], "clean": b.clean}


def fs_probe(where: Path, files: int = 500) -> float:
    """Microseconds to create and write one 3 KB file in a fresh folder under `where`."""
    import os

    d = Path(tempfile.mkdtemp(prefix="ahe-bench-fsprobe-", dir=where))
    data = b"x" * 3000
    try:
        t0 = time.perf_counter()
        for i in range(files):
            sub = d / f"t{i // 40}"
            sub.mkdir(exist_ok=True)
            fd = os.open(sub / f"step-{i:03d}.md", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, data)
            os.close(fd)
        return (time.perf_counter() - t0) / files * 1e6
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_place(base: Path | None, args: argparse.Namespace, label: str) -> dict[str, Any]:
    root = args.keep if (args.keep and base is None) else Path(tempfile.mkdtemp(prefix="ahe-bench-traces-", dir=base))
    it_dir = root / "iteration"
    try:
        t0 = time.perf_counter()
        made = make_iteration(it_dir, tasks=args.tasks, trials=args.trials, turns=args.turns)
        gen = time.perf_counter() - t0
        probe = fs_probe(root)
        print(f"  [{label}] synthetic iteration: {made['trials']} trials, {made['raw_bytes'] / 1e6:.1f} MB of trajectory.json "
              f"(written in {gen:.1f} s through TrajectoryWriter); creating a small file here takes {probe:.0f} us",
              file=sys.stderr, flush=True)
        cleans, corp, corp1 = [], [], []
        for r in range(args.repeat):
            cleans.append(bench_clean(it_dir))
            corp.append(bench_corpus(it_dir, None))
            corp1.append(bench_corpus(it_dir, 1))
            c = corp[-1]
            print(f"  [{label}] run {r + 1}/{args.repeat}: clean {cleans[-1].get('clean_mb_s', float('nan')):.0f} MB/s, "
                  f"corpus {c.get('mb_s', float('nan')):.0f} MB/s ({c.get('workers')} workers), "
                  f"corpus 1 worker {corp1[-1].get('mb_s', float('nan')):.0f} MB/s", file=sys.stderr, flush=True)
    finally:
        if not (args.keep and base is None):
            shutil.rmtree(root, ignore_errors=True)
    return {"made": made, "cleans": cleans, "corp": corp, "corp1": corp1, "fs_probe_us_per_file": probe, "where": str(base or root)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=89)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="build the (disk) iteration here and keep it")
    ap.add_argument("--no-tmpfs", action="store_true", help="do not repeat the corpus build on /dev/shm")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    places = [("disk", None)]
    if not args.no_tmpfs and Path("/dev/shm").is_dir():
        places.append(("tmpfs", Path("/dev/shm")))
    runs = {label: run_place(base, args, label) for label, base in places}
    made, cleans, corp, corp1 = (runs["disk"][k] for k in ("made", "cleans", "corp", "corp1"))
    rows, notes = [], []
    res: dict[str, Any] = {"raw_mb": made["raw_bytes"] / 1e6, "trials": made["trials"], "turns": args.turns}
    if cleans[0]["available"]:
        res["clean_mb_s"] = median(x["clean_mb_s"] for x in cleans)
        res["read_clean_mb_s"] = median(x["read_clean_mb_s"] for x in cleans)
        ci, co = cleans[0]["text_chars_in"], cleans[0]["text_chars_out"]
        res["text_tokens_in"], res["text_tokens_out"] = ci // 4, co // 4
        rows.append(["clean (texts only)", f"{res['clean_mb_s']:.0f}", f"{ci // 4:,}", f"{co // 4:,}", f"{ci / max(co, 1):.1f}x"])
        rows.append(["read + clean", f"{res['read_clean_mb_s']:.0f}", "", "", ""])
    else:
        notes.append(cleans[0]["why"])
    for place, pr in runs.items():
        res[f"fs_probe_us_per_file_{place}"] = pr["fs_probe_us_per_file"]
        for label, cr, key in (("corpus, default workers", pr["corp"], "corpus"), ("corpus, 1 worker", pr["corp1"], "corpus_1")):
            key = key if place == "disk" else f"{key}_{place}"
            if cr[0]["available"]:
                mbs = median(x["mb_s"] for x in cr)
                res[f"{key}_mb_s"] = mbs
                res[f"{key}_workers"] = cr[0]["workers"]
                res[f"{key}_sec"] = median(x["sec"] for x in cr)
                res[f"{key}_tokens"] = [cr[0]["raw_tokens"], cr[0]["corpus_tokens"]]
                res[f"{key}_files"] = cr[0]["files"]
                res[f"{key}_errors"] = cr[0]["errors"]
                rows.append([f"{label} [{cr[0]['workers']}] on {place} ({pr['fs_probe_us_per_file']:.0f} us/file)", f"{mbs:.0f}",
                             f"{cr[0]['raw_tokens']:,}", f"{cr[0]['corpus_tokens']:,}",
                             f"{cr[0]['raw_tokens'] / max(cr[0]['corpus_tokens'], 1):.1f}x"])
            elif cr[0]["why"] not in notes:
                notes.append(cr[0]["why"])
    print(table(["stage", "MB/s (median)", "tokens in", "tokens out", "reduction"], rows,
                title=f"Trace processing — {made['trials']} trials × {args.turns} turns, {made['raw_bytes'] / 1e6:.1f} MB of "
                      f"trajectories, median of {args.repeat} runs (mark: ≥ 50 MB/s)"))
    for n in notes:
        print(n)
    res["notes"] = notes
    res["repeat"] = args.repeat
    path = write_result("traces", res, args.out)
    print(f"\nwritten: {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


if __name__ == "__main__":
    main()
