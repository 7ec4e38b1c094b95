"""Benchmark 6 — the Ray executor against the local one, side by side in one run.

    python bench/bench_ray.py                                   # overhead (10 trials) + efficiency at 64 and 128
    python bench/bench_ray.py --sizes 8 --overhead-trials 4     # smoke size

A real local Ray cluster (ahe.testing.ray_cluster: a head and one worker node, separate
`ray start` processes, 64 logical CPUs each so 128 one-CPU trials fit at once) and the
scripted MOCK model in its own process with a fixed latency per call. Every trial is a real
trial of a generated task (write a word to /app/answer.txt, graded by a test.sh) in its own
sandbox, written to a run folder by `run_rollouts` — the same path `ahe eval` takes.

Per-trial overhead: N trials one at a time (concurrency 1), each `calls` model calls of
`latency` s; overhead = (wall on Ray − wall locally) / N. Both executors are warmed up first
(one trial each) and the one-time cost of Ray (joining, starting a runner per node,
shipping the harness and tasks) is reported apart.
Efficiency at M: M trials at once (concurrency M); ideal wall = calls × latency (no trial
can be faster); efficiency = ideal / measured wall, per executor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, MockProcess, table, write_result  # noqa: E402
from ray_breakdown import breakdown, render  # noqa: E402

sys.path.insert(0, str(REPO))
TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = "{w}" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


def make_tasks(root: Path, n: int) -> Path:
    for i in range(n):
        w = f"word{i:03d}"
        d = root / w
        (d / "tests").mkdir(parents=True)
        (d / "environment").mkdir()
        (d / "task.toml").write_text(f'[task]\nname = "{w}"\n[agent]\ntimeout_sec = 600\n[verifier]\ntimeout_sec = 60\n[environment]\ncpus = 1\n')
        (d / "instruction.md").write_text(f"Write the word {w} to /app/answer.txt.\n")
        (d / "environment" / "README").write_text("nothing\n")
        (d / "tests" / "test.sh").write_text(TEST_SH.format(w=w))
    return root


def policy(calls: int, latency: float) -> dict[str, Any]:
    """`calls` model calls per trial: calls-1 shell commands (the first writes the answer), then a reply."""
    rules = [{"name": "finish", "match": {"turn_min": calls}, "reply": "Done."}]
    rules.append({"name": "answer", "match": {"turn": 1},
                  "tool_calls": [{"name": "run_shell_command", "arguments": {"command": "echo {{ instruction.split()[3] }} > /app/answer.txt"}}]})
    rules.append({"name": "step", "match": {}, "tool_calls": [{"name": "run_shell_command", "arguments": {"command": "echo step"}}]})
    return {"name": "bench-ray", "latency_sec": latency, "rules": rules, "default": {"reply": "mock: no rule"}}


async def timed(cfg: Any, out: Path, executor: Any, on_event: Any = None) -> tuple[float, Any]:
    from ahe.rollout.scheduler import run_rollouts

    shutil.rmtree(out, ignore_errors=True)
    t0 = time.monotonic()
    res = await run_rollouts(cfg, out, executor=executor, on_event=on_event)
    return time.monotonic() - t0, res


def measure_overhead(args: Any, cfg: Any, cluster: Any, tmp: Path) -> dict[str, Any]:
    """N trials one at a time on each executor, interleaved over rounds; wall per trial and the
    executor's own time around each trial (start event → end event minus the trial's duration)."""
    from ahe.rollout.executor import AsyncioExecutor
    from ahe.rollout.ray_executor import RayExecutor

    with MockProcess(policy(2, args.overhead_latency), log_requests=False) as mock:
        n = args.overhead_trials
        execs, warm, walls, outside = {}, {}, {"local": [], "ray": []}, {"local": [], "ray": []}
        for name in ("local", "ray"):
            execs[name] = AsyncioExecutor(1) if name == "local" else RayExecutor(cluster.address, 1)
            w0 = time.monotonic()
            asyncio.run(timed(cfg(mock.base_url, 2, 1, name), tmp / f"warm-{name}", execs[name]))
            warm[name] = time.monotonic() - w0
        for r in range(args.rounds):
            for name in ("local", "ray") if r % 2 == 0 else ("ray", "local"):
                starts: dict[str, float] = {}

                def on_event(kind, spec, res, name=name, starts=starts, **_):
                    if kind == "start":
                        starts[spec.task_name] = time.monotonic()
                    elif res is not None:  # executor time around the trial: dispatch, transport, writing
                        outside[name].append(time.monotonic() - starts[spec.task_name] - res.duration_sec)

                wall, res = asyncio.run(timed(cfg(mock.base_url, n, 1, name), tmp / f"over-{name}", execs[name], on_event))
                assert res.n_passed == n, f"{name}: {res.n_passed}/{n} trials passed"
                walls[name].append(wall / n)
        for ex in execs.values():
            if hasattr(ex, "close"):
                ex.close()
    med = {k: statistics.median(v) for k, v in walls.items()}
    out_med = {k: statistics.median(v) for k, v in outside.items()}
    return {"trials": n, "rounds": args.rounds, "calls": 2, "latency": args.overhead_latency,
            "per_trial_local_ms": med["local"] * 1000, "per_trial_ray_ms": med["ray"] * 1000,
            "overhead_ms_per_trial": (med["ray"] - med["local"]) * 1000,
            "outside_trial_local_ms": out_med["local"] * 1000, "outside_trial_ray_ms": out_med["ray"] * 1000,
            "rounds_per_trial_ms": {k: [round(x * 1000, 1) for x in v] for k, v in walls.items()},
            "first_run_local_sec": warm["local"], "first_run_ray_sec": warm["ray"]}


def measure_efficiency(args: Any, cfg: Any, cluster: Any, tmp: Path, sizes: list[int], executors: list[str]) -> dict[str, Any]:
    """M trials at once on each executor (runners warmed up first, as in a long run); the wall
    time, efficiency = ideal / wall, and where each trial's time went (ray_breakdown)."""
    from ahe.rollout.executor import AsyncioExecutor
    from ahe.rollout.ray_executor import RayExecutor

    out: dict[str, Any] = {}
    with MockProcess(policy(args.calls, args.latency), log_requests=False) as mock:
        ideal = args.calls * args.latency
        for m in sizes:
            for name in executors:
                ex = AsyncioExecutor(m) if name == "local" else RayExecutor(cluster.address, m)
                asyncio.run(timed(cfg(mock.base_url, 8, 4, name), tmp / f"warm-eff-{name}", ex))
                times: dict[str, list[float]] = {}

                def on_event(kind, spec, res, times=times, **_):
                    times.setdefault(f"{spec.task_name}/{spec.trial}", []).append(time.time())

                t0 = time.time()
                run_dir = tmp / f"eff-{name}-{m}"
                wall, res = asyncio.run(timed(cfg(mock.base_url, m, m, name), run_dir, ex, on_event))
                if hasattr(ex, "close"):
                    ex.close()
                assert res.n_passed == m, f"{name} at {m}: {res.n_passed}/{m} passed, infra {res.infra_errors}"
                out.setdefault(str(m), {})[name] = {"wall": wall, "efficiency": ideal / wall,
                                                    "breakdown": breakdown(run_dir, times, wall, args.latency, t0)}
                shutil.rmtree(run_dir, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="64,128")
    ap.add_argument("--overhead-trials", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=4, help="interleaved local/Ray rounds of the overhead runs")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--latency", type=float, default=6.0, help="mock latency per call (s), efficiency runs")
    ap.add_argument("--overhead-latency", type=float, default=0.25, help="mock latency per call (s), overhead runs")
    ap.add_argument("--isolation", default="bwrap")
    ap.add_argument("--executors", default="local,ray", help="executors of the efficiency runs (profiling: one of them)")
    ap.add_argument("--skip-overhead", action="store_true", help="efficiency runs only (profiling)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    executors = [e.strip() for e in args.executors.split(",") if e.strip()]

    from ahe.llm.types import RoleConfig
    from ahe.rollout.scheduler import RolloutConfig
    from ahe.testing.ray_cluster import LocalRayCluster

    tmp = Path(tempfile.mkdtemp(prefix=f"ahe-bench-ray-{os.getpid()}-"))  # pid-named: swept after a kill
    tasks = make_tasks(tmp / "tasks", max(sizes + [args.overhead_trials + 1]))
    cluster = LocalRayCluster()
    data: dict[str, Any] = {"args": vars(args), "loadavg_before_each_part": {}}
    try:
        t0 = time.monotonic()
        cluster.start(cpus=64)
        cluster.add_node("w1", cpus=64)
        data["cluster_start_sec"] = round(time.monotonic() - t0, 2)

        def cfg(url: str, n: int, conc: int, executor: str) -> RolloutConfig:
            names = [f"word{i:03d}" for i in range(n)]
            return RolloutConfig(tasks_dir=tasks, workspace=REPO / "harness_workspace", include=names, k=1, concurrency=conc,
                                 agent_role=RoleConfig(model="mock", base_url=url, timeout_sec=120), isolation=args.isolation,
                                 executor=executor, ray_address=cluster.address)  # type: ignore[arg-type]

        if not args.skip_overhead:
            data["loadavg_before_each_part"]["overhead"] = list(os.getloadavg())
            data["overhead"] = measure_overhead(args, cfg, cluster, tmp)
        if sizes:
            data["loadavg_before_each_part"]["efficiency"] = list(os.getloadavg())
            data["sizes"] = measure_efficiency(args, cfg, cluster, tmp, sizes, executors)
            data["ideal_sec"] = args.calls * args.latency
        data["loadavg_at_end"] = list(os.getloadavg())
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    report(args, data, sizes, executors)


def report(args: Any, data: dict[str, Any], sizes: list[int], executors: list[str]) -> None:
    if "overhead" in data:
        o = data["overhead"]
        print(table(["executor", "wall per trial (ms, median of rounds)", "executor time outside the trial (ms, median)", "first run of 2 trials (s)"],
                    [["local", f"{o['per_trial_local_ms']:.0f}", f"{o['outside_trial_local_ms']:.1f}", f"{o['first_run_local_sec']:.2f}"],
                     ["ray", f"{o['per_trial_ray_ms']:.0f}", f"{o['outside_trial_ray_ms']:.1f}", f"{o['first_run_ray_sec']:.2f}"]],
                    title=f"per-trial overhead: {o['rounds']} interleaved rounds of {o['trials']} trials one at a time, 2 calls × {o['latency']} s "
                          f"→ Ray adds {o['overhead_ms_per_trial']:.1f} ms per trial (wall)"))
        print()
    if not sizes:  # overhead only: do not overwrite the full result
        print(f"\nwrote {write_result('ray-overhead', data)}")
        return
    rows, parts = [], []
    for m in sizes:
        row: list[Any] = [m]
        for name in executors:
            r = data["sizes"][str(m)][name]
            row += [f"{r['wall']:.2f}", f"{100 * r['efficiency']:.1f} %"]
            parts += render(name, m, r["breakdown"])
        rows.append(row)
    heads = ["M trials at once"] + [h for n in executors for h in (f"{n} wall (s)", f"{n} efficiency")]
    print(table(heads, rows, title=f"efficiency: ideal {data['ideal_sec']:.1f} s ({args.calls} calls × {args.latency} s), "
                                   f"isolation {args.isolation}, load {data['loadavg_before_each_part']['efficiency'][0]:.1f}"))
    print()
    print(table(["run", "part", "median trial (s)", "slowest trial (s)"], parts, title="where each trial's wall went"))
    full = executors == ["local", "ray"] and "overhead" in data
    print(f"\nwrote {write_result('ray' if full else 'ray-partial', data)}")


if __name__ == "__main__":
    main()
