"""Benchmark — the sealed verifiers' cost (issue 21 part 3, ahe/tasks/snapshot.py).

    python bench/bench_seal.py                      # examples/tasks (23 tasks), 20 repeats
    python bench/bench_seal.py --tasks DIR --repeat 5

  seal (cold)        a run's start: hash every file of every task folder, copy task.toml,
                     instruction.md, tests/ and solution/ into <run>/sealed, write index.json
  resume (cold)      a resumed run in a new process: every file hashed again, compared
  trial checks       what one trial adds, with the digests this process already has: the live
                     folder at the trial's start, then at its verifier stage the live folder,
                     the snapshot and loading task.toml from it (`verifier_task`)
  end check          the end of a rollout: every task's live folder once more
Also the bytes on disk of the snapshot beside those of the task folders.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _common import table, write_result  # noqa: E402

from ahe.tasks import load_tasks  # noqa: E402
from ahe.tasks import snapshot  # noqa: E402


def _cold() -> None:
    snapshot._digests.clear()
    snapshot._indexes.clear()


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=Path, default=REPO / "examples" / "tasks")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--out", type=Path, default=None, help="JSON output (default bench/results/seal.json)")
    args = ap.parse_args()
    tasks = load_tasks(args.tasks).tasks
    seal_ms, resume_ms, trial_ms, end_ms = [], [], [], []
    with tempfile.TemporaryDirectory(prefix=f"ahe-bench-seal-{os.getpid()}-") as tmp:
        for i in range(args.repeat):
            seal_dir = Path(tmp) / f"run-{i}" / "sealed"
            _cold()
            t0 = time.perf_counter()
            index = snapshot.seal_tasks(tasks, seal_dir)
            seal_ms.append((time.perf_counter() - t0) * 1e3)
            _cold()
            t0 = time.perf_counter()
            index = snapshot.seal_tasks(tasks, seal_dir)
            resume_ms.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            for task in tasks:  # one trial per task: its start check and its verifier stage
                entry = index.tasks[task.name]
                snapshot.check_folder(entry, task.path)
                snapshot.verifier_task(task, entry, task.path)
            trial_ms.append((time.perf_counter() - t0) * 1e3 / len(tasks))
            t0 = time.perf_counter()
            for task in tasks:
                snapshot.check_folder(index.tasks[task.name], task.path)
            end_ms.append((time.perf_counter() - t0) * 1e3)
            if i:
                shutil.rmtree(seal_dir.parent)
        sealed = Path(tmp) / "run-0" / "sealed"
        snap_bytes, task_bytes = _bytes(sealed), sum(_bytes(t.path) for t in tasks)
        n_files = sum(len(e.files) for e in index.tasks.values())
        n_sealed = sum(1 for p in sealed.rglob("*") if p.is_file())
    med = statistics.median
    rows = [[name, f"{med(v):.2f}", f"{min(v):.2f}"] for name, v in (
        ("seal (cold, run start)", seal_ms), ("resume check (cold)", resume_ms),
        ("per trial: start + verifier stage", trial_ms), ("end-of-rollout check", end_ms))]
    print(table(["what", "median ms", "min ms"], rows,
                title=f"{len(tasks)} tasks, {n_files} files, {task_bytes / 1024:.0f} KiB in the task folders; snapshot "
                      f"{snap_bytes / 1024:.0f} KiB ({n_sealed} files, index.json included); {args.repeat} repeats"))
    path = write_result("seal", {"tasks": len(tasks), "files": n_files, "task_kib": round(task_bytes / 1024, 1),
                                 "snapshot_kib": round(snap_bytes / 1024, 1), "repeat": args.repeat,
                                 "ms": {r[0]: {"median": float(r[1]), "min": float(r[2])} for r in rows}}, args.out)
    print(f"written: {path}")


if __name__ == "__main__":
    main()
