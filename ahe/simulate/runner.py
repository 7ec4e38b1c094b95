"""Run the real evolution loop on simulated worlds, one run folder per (seed, policy).

Each run is an ordinary `EvolutionLoop` run folder (git workspace, results, attribution,
rollback, scores, history), with the simulated executor and the scripted evolve phase behind
the loop's seams; `ahe audit` and `ahe report` open it like any other. The metrics compare
what the loop decided with the world's hidden truth (`ahe.simulate.metrics`).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from ahe.config import AttributionSettings, DebuggerSettings, ExperimentConfig
from ahe.simulate.evolve import ScriptedEvolve
from ahe.simulate.executor import SimulatedExecutor
from ahe.simulate.metrics import RunMetrics, measure
from ahe.simulate.scenario import Scenario
from ahe.simulate.world import World, task_names


def write_tasks(root: Path, n: int) -> Path:
    """Minimal Harbor task folders (the loop loads them; the simulated executor never runs them)."""
    root.mkdir(parents=True, exist_ok=True)
    for name in task_names(n):
        d = root / name
        if (d / "task.toml").exists():
            continue
        (d / "tests").mkdir(parents=True, exist_ok=True)
        (d / "task.toml").write_text(f'[task]\nname = "{name}"\n\n[metadata]\ncategory = "simulated"\n')
        (d / "instruction.md").write_text(f"Simulated task {name}: outcomes come from the decision simulator.\n")
        (d / "tests" / "test.sh").write_text("#!/bin/sh\n# never run: the simulated executor decides outcomes\nexit 1\n")
    return root


def run_one(sc: Scenario, world: World, policy: str, run_dir: Path, tasks_dir: Path, *, evolve=None) -> RunMetrics:
    """One seed under one policy: the real loop, start to finish, then its metrics. `evolve`: the scripted
    evolve phase (default: the world's stream, `ScriptedEvolve`; a tree world's is `ParentAwareEvolve`)."""
    from ahe.evolution.loop import EvolutionLoop

    cfg = ExperimentConfig(
        name=f"simulate-{sc.name}-seed{world.seed}-{policy}",
        tasks=tasks_dir,
        iterations=sc.iterations,
        k=sc.k,
        concurrency=1,
        retry_infra=0,
        attribution=AttributionSettings(strictness=policy, reeval_share=sc.reeval_share, reeval_ceiling=sc.reeval_ceiling),
        debugger=DebuggerSettings(enabled=False),
    )
    if run_dir.exists():
        shutil.rmtree(run_dir)
    loop = EvolutionLoop(cfg, run_dir, executor=SimulatedExecutor(world), evolve=evolve or ScriptedEvolve(world, gate=sc.gate))
    repo = loop.prepare(resume=False)
    asyncio.run(loop.run_loop(repo, {}))
    return measure(run_dir, world, policy)
