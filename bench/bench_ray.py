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
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, MockProcess, table, write_result  # noqa: E402

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="64,128")
    ap.add_argument("--overhead-trials", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=4, help="interleaved local/Ray rounds of the overhead runs")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--latency", type=float, default=6.0, help="mock latency per call (s), efficiency runs")
    ap.add_argument("--overhead-latency", type=float, default=0.25, help="mock latency per call (s), overhead runs")
    ap.add_argument("--isolation", default="bwrap")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    from ahe.llm.types import RoleConfig
    from ahe.rollout.executor import AsyncioExecutor
    from ahe.rollout.ray_executor import RayExecutor
    from ahe.rollout.scheduler import RolloutConfig
    from ahe.testing.ray_cluster import LocalRayCluster

    tmp = Path(tempfile.mkdtemp(prefix="ahe-bench-ray-"))
    tasks = make_tasks(tmp / "tasks", max(sizes + [args.overhead_trials + 1]))
    cluster = LocalRayCluster()
    rows, data = [], {"sizes": {}, "args": vars(args)}
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

        # ---- per-trial overhead, one trial at a time, local and Ray interleaved round by round
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
            data["overhead"] = {"trials": n, "rounds": args.rounds, "calls": 2, "latency": args.overhead_latency,
                                "per_trial_local_ms": med["local"] * 1000, "per_trial_ray_ms": med["ray"] * 1000,
                                "overhead_ms_per_trial": (med["ray"] - med["local"]) * 1000,
                                "outside_trial_local_ms": out_med["local"] * 1000, "outside_trial_ray_ms": out_med["ray"] * 1000,
                                "rounds_per_trial_ms": {k: [round(x * 1000, 1) for x in v] for k, v in walls.items()},
                                "first_run_local_sec": warm["local"], "first_run_ray_sec": warm["ray"]}

        # ---- efficiency at M trials at once
        with MockProcess(policy(args.calls, args.latency), log_requests=False) as mock:
            ideal = args.calls * args.latency
            for m in sizes:
                row = [m]
                for name in ("local", "ray"):
                    ex = AsyncioExecutor(m) if name == "local" else RayExecutor(cluster.address, m)
                    # warm up before the clock starts, as in a long run: runners up on every node,
                    # the harness loaded and the model client made there (and locally)
                    asyncio.run(timed(cfg(mock.base_url, 8, 4, name), tmp / f"warm-eff-{name}", ex))
                    wall, res = asyncio.run(timed(cfg(mock.base_url, m, m, name), tmp / f"eff-{name}-{m}", ex))
                    if hasattr(ex, "close"):
                        ex.close()
                    assert res.n_passed == m, f"{name} at {m}: {res.n_passed}/{m} passed, infra {res.infra_errors}"
                    data["sizes"].setdefault(str(m), {})[name] = {"wall": wall, "efficiency": ideal / wall}
                    row += [f"{wall:.2f}", f"{100 * ideal / wall:.1f} %"]
                rows.append(row)
            data["ideal_sec"] = ideal
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    o = data["overhead"]
    print(table(["executor", "wall per trial (ms, median of rounds)", "executor time outside the trial (ms, median)", "first run of 2 trials (s)"],
                [["local", f"{o['per_trial_local_ms']:.0f}", f"{o['outside_trial_local_ms']:.1f}", f"{o['first_run_local_sec']:.2f}"],
                 ["ray", f"{o['per_trial_ray_ms']:.0f}", f"{o['outside_trial_ray_ms']:.1f}", f"{o['first_run_ray_sec']:.2f}"]],
                title=f"per-trial overhead: {o['rounds']} interleaved rounds of {o['trials']} trials one at a time, 2 calls × {o['latency']} s "
                      f"→ Ray adds {o['overhead_ms_per_trial']:.1f} ms per trial (wall)"))
    print()
    if not rows:  # overhead only: do not overwrite the full result
        print(f"\nwrote {write_result('ray-overhead', data)}")
        return
    print(table(["M trials at once", "local wall (s)", "local efficiency", "ray wall (s)", "ray efficiency"], rows,
                title=f"efficiency: ideal {data['ideal_sec']:.1f} s ({args.calls} calls × {args.latency} s), isolation {args.isolation}"))
    print(f"\nwrote {write_result('ray', data)}")


if __name__ == "__main__":
    main()
