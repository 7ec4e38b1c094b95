"""Benchmark 4 — trace processing: cleaning and corpus building, MB/s and tokens in vs out.

    python bench/bench_traces.py                      # 89 tasks × 2 trials × 40 turns (~50 MB of trajectories), 3 repeats
    python bench/bench_traces.py --tasks 3 --turns 5 --repeat 1          # smoke size

The synthetic iteration comes from `debugger.synthetic.make_iteration`, written through the
runtime's `TrajectoryWriter` and `EventLog` — byte for byte what real sessions write
(incrementally kept-valid JSON, then the final atomic rewrite). Tool outputs
mix what coding sessions produce: build and test logs of 1–60 KB (some far over the
cleaner's 6,000-character cut), tracebacks, the same file read again and again (exact
repeats), progress bars rewritten with carriage returns, coloured (ANSI) test output, and
base64 dumps. Deterministic for a seed.

Measured, each as MB of trajectory.json per second of wall time:
  clean         `debugger.Cleaner.clean` over every text of every step (messages, tool-call
                arguments, tool outputs), in one process, JSON parsing excluded
  read+clean    the same including reading and parsing each trajectory.json
  corpus        `debugger.build_corpus(iteration_dir)` — the whole corpus: each session's steps
                (packed in its steps.md), indexes, divergence notes (with its default workers:
                one process below 96 MB of trajectories, one per core above),
  corpus (1 worker)   the same in this process only
each also as MB per CPU second (user + system, this process and its workers), with the load
average at each run and the time the building thread waited for a CPU (/proc schedstat):
the machine is shared, and CPU time is what the load does not inflate.
And the tokens (4 characters each, the runtime's estimate) of the raw traces vs the corpus.
When `debugger` does not (yet) expose `build_corpus` or `Cleaner`, that line says so.

The iteration is built in the temporary folder (on disk: check with `df -T`) and, when
/dev/shm exists, also on tmpfs; a probe reports the disk's cost of creating one small file
(what a file per step used to cost the corpus, 7,878 times for the default size).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, median, table, write_result  # noqa: E402

from debugger.synthetic import make_iteration  # noqa: E402

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
    cpu0, wait0 = _cpu(), _waited()
    t0 = time.perf_counter()
    b = build_corpus(it_dir, workers=workers)
    wall = time.perf_counter() - t0
    cpu, waited = _cpu() - cpu0, _waited() - wait0
    return {"available": True, "raw_bytes": b.raw_bytes, "corpus_bytes": b.corpus_bytes, "files": b.files, "steps": b.steps,
            "workers": b.workers, "sec": wall, "mb_s": b.raw_bytes / 1e6 / wall, "cpu_sec": cpu,
            "cpu_mb_s": b.raw_bytes / 1e6 / cpu if cpu > 0 else float("nan"), "load1": os.getloadavg()[0],
            "waited_for_cpu_sec": waited,
            "raw_tokens": b.raw_bytes // 4, "corpus_tokens": b.corpus_bytes // 4, "errors": b.errors[:5], "clean": b.clean}


def _waited() -> float:
    """Seconds this thread spent runnable but waiting for a CPU (the load's share of the wall time); NaN off Linux."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return float("nan")


def _cpu() -> float:
    """CPU seconds (user + system) of this process, its threads and its finished worker processes."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


_BASELINE_CHILD = """
import json, os, resource, shutil, sys, time
from pathlib import Path
it = Path(sys.argv[1])
shutil.rmtree(it / "corpus", ignore_errors=True)
from debugger import build_corpus
def cpu():
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
c0, t0 = cpu(), time.perf_counter()
b = build_corpus(it, workers=1)
wall, used = time.perf_counter() - t0, cpu() - c0
shutil.rmtree(it / "corpus", ignore_errors=True)
print(json.dumps({"available": True, "raw_bytes": b.raw_bytes, "corpus_bytes": b.corpus_bytes, "files": b.files,
                  "steps": b.steps, "workers": b.workers, "sec": wall, "mb_s": b.raw_bytes / 1e6 / wall, "cpu_sec": used,
                  "cpu_mb_s": b.raw_bytes / 1e6 / used, "load1": os.getloadavg()[0], "raw_tokens": b.raw_bytes // 4,
                  "corpus_tokens": b.corpus_bytes // 4, "errors": b.errors[:5]}))
"""


def bench_baseline(it_dir: Path, src: Path) -> dict[str, Any]:
    """`build_corpus(workers=1)` of another checkout (`src`, e.g. `git archive main`) on the same iteration.

    Run in a child process whose `debugger` and `ahe` come from `src`; timed inside the child
    around the call only, as `bench_corpus` times this checkout's.
    """
    import subprocess

    shutil.rmtree(it_dir / "corpus", ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(src) + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")}
    p = subprocess.run([sys.executable, "-c", _BASELINE_CHILD, str(it_dir)], cwd=src, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return {"available": False, "why": f"the baseline build in {src} failed: {p.stderr.strip()[-300:]}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def fs_probe(where: Path, files: int = 500) -> float:
    """Microseconds to create and write one 3 KB file in a fresh folder under `where`."""
    d = Path(tempfile.mkdtemp(prefix=f"ahe-bench-fsprobe-{os.getpid()}-", dir=where))
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


def run_place(base_dir: Path | None, args: argparse.Namespace, label: str) -> dict[str, Any]:
    root = args.keep if (args.keep and base_dir is None) else Path(tempfile.mkdtemp(prefix=f"ahe-bench-traces-{os.getpid()}-", dir=base_dir))
    it_dir = root / "iteration"
    try:
        t0 = time.perf_counter()
        made = make_iteration(it_dir, tasks=args.tasks, trials=args.trials, turns=args.turns)
        gen = time.perf_counter() - t0
        probe = fs_probe(root)
        print(f"  [{label}] synthetic iteration: {made['trials']} trials, {made['raw_bytes'] / 1e6:.1f} MB of trajectory.json "
              f"(written in {gen:.1f} s through TrajectoryWriter); creating a small file here takes {probe:.0f} us",
              file=sys.stderr, flush=True)
        cleans, corp, corp1, base = [], [], [], []
        for r in range(args.repeat):
            cleans.append(bench_clean(it_dir))
            corp.append(bench_corpus(it_dir, None))
            corp1.append(bench_corpus(it_dir, 1))
            if args.baseline:
                base.append(bench_baseline(it_dir, args.baseline))
                print(f"  [{label}] run {r + 1}/{args.repeat}: baseline {args.baseline}: "
                      f"{base[-1].get('mb_s', float('nan')):.0f} MB/s wall, {base[-1].get('cpu_mb_s', float('nan')):.0f} MB/s CPU, "
                      f"{base[-1].get('files', '?')} files", file=sys.stderr, flush=True)
            c = corp[-1]
            print(f"  [{label}] run {r + 1}/{args.repeat}: clean {cleans[-1].get('clean_mb_s', float('nan')):.0f} MB/s, "
                  f"corpus {c.get('mb_s', float('nan')):.0f} MB/s wall, {c.get('cpu_mb_s', float('nan')):.0f} MB/s CPU "
                  f"({c.get('workers')} workers), corpus 1 worker {corp1[-1].get('mb_s', float('nan')):.0f} MB/s wall, "
                  f"{corp1[-1].get('cpu_mb_s', float('nan')):.0f} MB/s CPU, {corp1[-1].get('sec', float('nan')):.2f} s of which "
                  f"{corp1[-1].get('waited_for_cpu_sec', float('nan')):.2f} s waiting for a CPU; load {c.get('load1', float('nan')):.1f}",
                  file=sys.stderr, flush=True)
    finally:
        if not (args.keep and base_dir is None):
            shutil.rmtree(root, ignore_errors=True)
    return {"made": made, "cleans": cleans, "corp": corp, "corp1": corp1, "base": base, "fs_probe_us_per_file": probe,
            "where": str(base_dir or root)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=89)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, default=None, help="build the (disk) iteration here and keep it")
    ap.add_argument("--no-tmpfs", action="store_true", help="do not repeat the corpus build on /dev/shm")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another checkout (e.g. `git archive main | tar -x -C DIR`) whose build_corpus(workers=1) runs "
                         "on the same iteration, interleaved with this one's, in a child process")
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
        rows.append(["clean (texts only)", f"{res['clean_mb_s']:.0f}", "", f"{ci // 4:,}", f"{co // 4:,}", f"{ci / max(co, 1):.1f}x"])
        rows.append(["read + clean", f"{res['read_clean_mb_s']:.0f}", "", "", "", ""])
    else:
        notes.append(cleans[0]["why"])
    for place, pr in runs.items():
        res[f"fs_probe_us_per_file_{place}"] = pr["fs_probe_us_per_file"]
        variants = [("corpus, default workers", pr["corp"], "corpus"), ("corpus, 1 worker", pr["corp1"], "corpus_1")]
        if pr["base"]:
            variants.append((f"baseline {args.baseline.name}, 1 worker", pr["base"], "baseline"))
        for label, cr, key in variants:
            key = key if place == "disk" else f"{key}_{place}"
            if cr[0]["available"]:
                mbs = median(x["mb_s"] for x in cr)
                res[f"{key}_mb_s"] = mbs
                res[f"{key}_workers"] = cr[0]["workers"]
                res[f"{key}_sec"] = median(x["sec"] for x in cr)
                res[f"{key}_cpu_mb_s"] = median(x["cpu_mb_s"] for x in cr)
                res[f"{key}_runs_mb_s"] = [round(x["mb_s"], 1) for x in cr]
                res[f"{key}_load1"] = [round(x["load1"], 1) for x in cr]
                res[f"{key}_waited_for_cpu_sec"] = [round(x.get("waited_for_cpu_sec", float("nan")), 3) for x in cr]
                res[f"{key}_tokens"] = [cr[0]["raw_tokens"], cr[0]["corpus_tokens"]]
                res[f"{key}_files"] = cr[0]["files"]
                res[f"{key}_errors"] = cr[0]["errors"]
                rows.append([f"{label} [{cr[0]['workers']}] on {place} ({pr['fs_probe_us_per_file']:.0f} us/file)", f"{mbs:.0f}",
                             f"{res[f'{key}_cpu_mb_s']:.0f}", f"{cr[0]['raw_tokens']:,}", f"{cr[0]['corpus_tokens']:,}",
                             f"{cr[0]['raw_tokens'] / max(cr[0]['corpus_tokens'], 1):.1f}x"])
            elif cr[0]["why"] not in notes:
                notes.append(cr[0]["why"])
    load = os.getloadavg()
    res["load_at_end"] = [round(x, 2) for x in load]
    print(table(["stage", "MB/s wall (median)", "MB/s CPU", "tokens in", "tokens out", "reduction"], rows,
                title=f"Trace processing — {made['trials']} trials × {args.turns} turns, {made['raw_bytes'] / 1e6:.1f} MB of "
                      f"trajectories, median of {args.repeat} runs (mark: ≥ 50 MB/s); load average at the end "
                      f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} cores"))
    for n in notes:
        print(n)
    res["notes"] = notes
    res["repeat"] = args.repeat
    path = write_result("traces", res, args.out)
    print(f"\nwritten: {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


if __name__ == "__main__":
    main()
