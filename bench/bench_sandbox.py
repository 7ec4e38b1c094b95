"""Benchmark 8 — the local sandbox's exec round trip, in wall time and in CPU time.

    python bench/bench_sandbox.py                  # 500 execs of `echo step N` in one bwrap sandbox
    python bench/bench_sandbox.py --execs 50       # smoke size
    git show <rev>:ahe/sandbox/local_driver.py > /tmp/old_driver.py
    python bench/bench_sandbox.py --baseline-driver /tmp/old_driver.py   # this driver vs another, interleaved

Wall time per exec depends on how busy the machine is (on 2 cores at a load of 20 the median
is 5x the quiet one); CPU time does not, so both are reported: AHE's own process, and the
sandbox's processes (bwrap, the driver, and the `bash -c` of each command, read from /proc).
The CPU sum is what the round trip costs; on a quiet machine the wall time approaches it.
With `--baseline-driver`, a second sandbox runs that driver source and the two take turns in
rounds of 25 execs, so both see the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, pct, self_cpu, table, tree_cpu, write_result  # noqa: E402

ROUND = 25


async def _start(app: Path, driver: Path | None) -> Any:
    from ahe.sandbox import local

    default = local._DRIVER_PATH
    local._DRIVER_PATH = driver or default  # the driver source is read once, at start()
    try:
        # root_dir next to app: both sandboxes' output folders in one parent folder, so both
        # create files in the same ext4 block group (whose state sets the cost of a new file)
        sb = local.LocalSandbox(app, root_dir=app.parent / f"{app.name}-root", isolation="bwrap")
        await sb.start()
    finally:
        local._DRIVER_PATH = default
    for _ in range(20):
        await sb.exec("echo warm", timeout=10)
    return sb


async def measure(execs: int, baseline: Path | None) -> dict[str, dict[str, Any]]:
    drivers = {"this driver": None} | ({f"baseline ({baseline.name})": baseline} if baseline else {})
    walls: dict[str, list[float]] = {k: [] for k in drivers}
    cpu_host = dict.fromkeys(drivers, 0.0)
    cpu_box = dict.fromkeys(drivers, 0.0)
    loads = []
    with tempfile.TemporaryDirectory(prefix=f"ahe-bench-sandbox-{os.getpid()}-") as d:
        boxes = {}
        try:
            for i, (name, driver) in enumerate(drivers.items()):
                boxes[name] = await _start(Path(d) / f"app{i}", driver)
            done = 0
            while done < execs:
                n = min(ROUND, execs - done)
                loads.append(os.getloadavg()[0])
                order = list(boxes.items())
                for name, sb in order if (done // ROUND) % 2 == 0 else reversed(order):
                    k0, s0 = tree_cpu(sb._proc.pid), self_cpu()
                    for i in range(done, done + n):
                        t = time.perf_counter()
                        await sb.exec(f"echo step {i}", timeout=30)
                        walls[name].append(time.perf_counter() - t)
                    cpu_host[name] += self_cpu() - s0
                    cpu_box[name] += tree_cpu(sb._proc.pid) - k0
                done += n
        finally:
            for sb in boxes.values():
                await sb.stop()
    return {name: {"execs": execs, "wall_median_ms": median(w) * 1e3, "wall_p10_ms": pct(w, 10) * 1e3,
                   "wall_p90_ms": pct(w, 90) * 1e3, "cpu_host_ms": cpu_host[name] / execs * 1e3,
                   "cpu_sandbox_ms": cpu_box[name] / execs * 1e3,
                   "cpu_total_ms": (cpu_host[name] + cpu_box[name]) / execs * 1e3,
                   "load_min": min(loads), "load_max": max(loads)}
            for name, w in walls.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--execs", type=int, default=500)
    ap.add_argument("--baseline-driver", type=Path, default=None,
                    help="another local_driver.py source to run interleaved with this one")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.baseline_driver is not None and not args.baseline_driver.is_file():
        ap.error(f"--baseline-driver {args.baseline_driver} is not a file; write one with "
                 "`git show <rev>:ahe/sandbox/local_driver.py > FILE`")
    res = asyncio.run(measure(args.execs, args.baseline_driver))
    rows = [[name, r["execs"], f"{r['wall_median_ms']:.2f}", f"{r['wall_p10_ms']:.2f}", f"{r['wall_p90_ms']:.2f}",
             f"{r['cpu_host_ms']:.2f}", f"{r['cpu_sandbox_ms']:.2f}", f"{r['cpu_total_ms']:.2f}",
             f"{r['load_min']:.1f}–{r['load_max']:.1f}"] for name, r in res.items()]
    print(table(["driver", "execs", "wall median ms", "p10", "p90", "CPU AHE ms", "CPU sandbox ms",
                 "CPU total ms", "load"], rows, title="local sandbox exec round trip (bwrap)"))
    print(f"wrote {write_result('sandbox', {'drivers': res}, args.out)}")


if __name__ == "__main__":
    main()
