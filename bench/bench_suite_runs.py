"""CPU of six simulated runs of the standard suite in one process (process + git children), and a
fingerprint of their metrics, for docs/benchmarks.md §11 (issue 23: the suite in ≤ 15 minutes).

    PYTHONPATH=<tree> python bench/bench_suite_runs.py

The fingerprint must not change with a speed-up (the simulator is deterministic); CPU time is what
the machine's load inflates least. Imports are warmed first, as in a suite worker.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import ahe.evolution.loop  # noqa: F401  (warm imports: a suite worker imports once)
import ahe.simulate.metrics  # noqa: F401
from ahe.simulate.runner import run_one, write_tasks
from ahe.simulate.suite import load_suite
from ahe.simulate.world import make_world

RUNS = [("tb2-paper", "paper", 1000), ("tb2-paper", "noise", 1000), ("tb2-paper", "expected-value", 1000),
        ("large-noisy", "expected-value", 1001), ("one-change", "paper", 1002), ("weak-agent", "noise", 1003)]


def main() -> None:
    worlds = {w.name: w for w in load_suite("standard").worlds}
    root = Path(tempfile.mkdtemp(prefix="ahe-bench-suite-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None))
    fingerprint, total, rounds = hashlib.sha256(), 0.0, 0
    try:
        for name, policy, seed in RUNS:
            sc = worlds[name]
            tasks = write_tasks(root / name / "tasks", sc.tasks.count)
            c0, ch0 = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
            m = run_one(sc, make_world(sc, seed), policy, root / name / policy, tasks)
            ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            children = ch1.ru_utime + ch1.ru_stime - ch0.ru_utime - ch0.ru_stime
            cpu = time.process_time() - c0 + children
            total, rounds = total + cpu, rounds + sc.iterations + 1
            fingerprint.update(m.model_dump_json().encode())
            print(f"{name:12s} {policy:15s} seed {seed}: CPU {cpu:5.2f} s (git children {children:4.2f}), "
                  f"{cpu / (sc.iterations + 1):.3f} s a round")
            shutil.rmtree(root / name / policy)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"total CPU {total:.2f} s, {total / rounds:.3f} s a round; metrics fingerprint {fingerprint.hexdigest()[:16]}; "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
