"""How long a bwrap sandbox takes to start and run its first command (issue 33's cost check).

    python bench/bench_jail_start.py [--runs 15]
    PYTHONPATH=/path/to/other/checkout python bench/bench_jail_start.py   # the same, another tree

One sample = `LocalSandbox.start()` + `exec("true")`, measured to the answer; `stop()` is not
timed. The first sandbox is a warm-up (caches: the /etc masks, the driver source). Prints the
median and minimum wall time and this process's own CPU per sandbox; the children's CPU is
printed too but is not comparable between trees whose jails end differently (a killed bwrap's
children are never reaped into this process's usage).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import time

from ahe.sandbox.local import LocalSandbox
from ahe.tempdirs import temp_dir


async def one(app: str) -> float:
    sandbox = LocalSandbox(app)
    t0 = time.perf_counter()
    await sandbox.start()
    await sandbox.exec("true", timeout=30)
    took = time.perf_counter() - t0
    await sandbox.stop()
    return took


def cpu(who: int) -> float:
    u = resource.getrusage(who)
    return u.ru_utime + u.ru_stime


async def main(runs: int) -> None:
    with temp_dir("bench-jail") as app:
        await one(str(app))
        s0, c0 = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
        times = [await one(str(app)) for _ in range(runs)]
        s1, c1 = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
    import ahe

    print(f"{ahe.__file__}: start + first exec median {statistics.median(times) * 1000:.1f} ms, "
          f"min {min(times) * 1000:.1f} ms; CPU per sandbox {(s1 - s0) / runs * 1000:.1f} ms here, "
          f"{(c1 - c0) / runs * 1000:.1f} ms reaped children ({runs} runs)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    asyncio.run(main(ap.parse_args().runs))
