"""CPU seconds of one simulated run (process + its git children), for docs/benchmarks.md §9.

    PYTHONPATH=<tree> ROOT=/tmp/x python bench/bench_simulate.py paper|noise|expected-value [seed]
"""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path

from ahe.simulate.runner import run_one, write_tasks
from ahe.simulate.scenario import Scenario
from ahe.simulate.world import make_world


def main() -> None:
    policy = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    sc = Scenario(iterations=10)
    root = Path(os.environ.get("ROOT", "/dev/shm/ahe-bench-sim"))
    tasks = write_tasks(root / "tasks", sc.tasks.count)
    t0, c0 = time.monotonic(), time.process_time()
    ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = run_one(sc, make_world(sc, seed), policy, root / policy, tasks)
    ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = ch1.ru_utime + ch1.ru_stime - ch0.ru_utime - ch0.ru_stime
    print(f"{policy}: wall {time.monotonic() - t0:.1f} s, CPU {time.process_time() - c0 + children:.1f} s "
          f"(children {children:.1f} s); H_best true pass@1 {m.best_true:.4f}, rollouts {m.rollouts}")


if __name__ == "__main__":
    main()
