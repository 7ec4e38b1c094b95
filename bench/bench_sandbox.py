"""Benchmark 6 — the local sandbox's exec round trip, in wall time and in CPU time.

    python bench/bench_sandbox.py                  # 500 execs of `echo step N` in one bwrap sandbox
    python bench/bench_sandbox.py --execs 50       # smoke size

Wall time per exec depends on how busy the machine is (on 2 cores at a load of 20 the median
is 5x the quiet one); CPU time does not, so both are reported: AHE's own process, and the
sandbox's processes (bwrap, the driver, and the `bash -c` of each command, read from /proc).
The CPU sum is what the round trip costs; on a quiet machine the wall time approaches it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, pct, table, write_result  # noqa: E402


def _tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its descendants (live ones, plus reaped children's totals)."""
    total = 0.0
    try:
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            total += _tree_cpu(int(child))
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return total
    return total + sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


async def measure(execs: int) -> dict[str, Any]:
    from ahe.sandbox.local import LocalSandbox

    with tempfile.TemporaryDirectory(prefix="ahe-bench-sandbox-") as d:
        sb = LocalSandbox(Path(d) / "app", isolation="bwrap")
        await sb.start()
        try:
            for _ in range(20):
                await sb.exec("echo warm", timeout=10)
            k0, s0 = _tree_cpu(sb._proc.pid), resource.getrusage(resource.RUSAGE_SELF)
            walls = []
            for i in range(execs):
                t = time.perf_counter()
                await sb.exec(f"echo step {i}", timeout=30)
                walls.append(time.perf_counter() - t)
            k1, s1 = _tree_cpu(sb._proc.pid), resource.getrusage(resource.RUSAGE_SELF)
        finally:
            await sb.stop()
    host = (s1.ru_utime + s1.ru_stime - s0.ru_utime - s0.ru_stime) / execs
    return {"execs": execs, "wall_median_ms": median(walls) * 1e3, "wall_p10_ms": pct(walls, 10) * 1e3,
            "cpu_host_ms": host * 1e3, "cpu_sandbox_ms": (k1 - k0) / execs * 1e3,
            "cpu_total_ms": (host + (k1 - k0) / execs) * 1e3, "load_before": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--execs", type=int, default=500)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    r = asyncio.run(measure(args.execs))
    print(table(["execs", "wall median ms", "wall p10 ms", "CPU AHE ms", "CPU sandbox ms", "CPU total ms", "load"],
                [[r["execs"], f"{r['wall_median_ms']:.2f}", f"{r['wall_p10_ms']:.2f}", f"{r['cpu_host_ms']:.2f}",
                  f"{r['cpu_sandbox_ms']:.2f}", f"{r['cpu_total_ms']:.2f}", f"{r['load_before']:.1f}"]],
                title="local sandbox exec round trip (bwrap)"))
    print(f"wrote {write_result('sandbox', r, args.out)}")


if __name__ == "__main__":
    main()
