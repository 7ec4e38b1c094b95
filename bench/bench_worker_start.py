"""Benchmark — how long a confined worker takes to start: a bwrap jail vs. a container of its own.

    python bench/bench_worker_start.py                 # 5 runs each, interleaved (needs a Docker engine)
    python bench/bench_worker_start.py --runs 1 --out r.json   # (default: bench/results/worker_start.json)
    python bench/bench_worker_start.py --runs 3 --concurrent 8   # also: 8 launched at once, until all are ready

Per run and kind: launch (the jail or container started), ready (the worker has imported the
runtime and opened its socket: the first thing a trial waits for when no spare is ready) and
close (the jail killed, or the container removed with every process in it), each from the
host's side. Medians are printed with the 1-minute load average beside them: on a shared
machine compare the two kinds from one run, never across runs. With --concurrent N, N workers
of each kind are also launched at once and the time until the last is ready is reported (as when
an executor starts N trials together).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

from ahe.confine.host import ConfinedWorker

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402

SEED = Path(__file__).resolve().parents[1] / "harness_workspace"


async def _one(mode: str) -> dict[str, float]:
    t0 = time.monotonic()
    worker = await ConfinedWorker.launch(SEED, mode)  # type: ignore[arg-type]
    t1 = time.monotonic()
    await worker._connection()
    t2 = time.monotonic()
    await worker.close()
    return {"launch_ms": (t1 - t0) * 1e3, "ready_ms": (t2 - t0) * 1e3, "close_ms": (time.monotonic() - t2) * 1e3}


async def _together(mode: str, n: int) -> float:
    t0 = time.monotonic()
    workers = await asyncio.gather(*(ConfinedWorker.launch(SEED, mode) for _ in range(n)))  # type: ignore[arg-type]
    await asyncio.gather(*(w._connection() for w in workers))
    elapsed = time.monotonic() - t0
    await asyncio.gather(*(w.close() for w in workers))
    return elapsed * 1e3


async def _main(runs: int, concurrent: int = 0) -> dict:
    for mode in ("bwrap", "docker"):  # the image, ldd and bwrap's self-check, once
        await _one(mode)
    samples: dict[str, list[dict[str, float]]] = {"bwrap": [], "docker": []}
    for _ in range(runs):
        for mode in samples:
            samples[mode].append(await _one(mode))
    out = {mode: {k: round(statistics.median(s[k] for s in rows), 1) for k in rows[0]} for mode, rows in samples.items()}
    if concurrent:
        for mode in samples:
            out[mode]["all_ready_ms"] = round(statistics.median([await _together(mode, concurrent) for _ in range(runs)]), 1)
    out["runs"], out["concurrent"], out["load_1min"] = runs, concurrent, round(os.getloadavg()[0], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--concurrent", type=int, default=0, help="also launch this many of each kind at once")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    result = asyncio.run(_main(args.runs, args.concurrent))
    for mode in ("bwrap", "docker"):
        r = result[mode]
        together = f"  {args.concurrent} at once: all ready {r['all_ready_ms']:6.0f} ms" if args.concurrent else ""
        print(f"{mode:6}  launch {r['launch_ms']:6.0f} ms  ready {r['ready_ms']:6.0f} ms  close {r['close_ms']:5.0f} ms{together}")
    print(f"median of {result['runs']}; 1-minute load {result['load_1min']}")
    print(f"written to {write_result('worker_start', result, args.out)}")


if __name__ == "__main__":
    main()
