"""Estimates are not scores: a run whose agent solves nothing never shows a prior-lifted best,
and history, audit and report name the same best harness (issue 23, part 6)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ahe.config import AttributionSettings, DebuggerSettings, ExperimentConfig
from ahe.evolution.evidence import Counts, fit_prior
from ahe.evolution.loop import EvolutionLoop
from ahe.simulate.evolve import ScriptedEvolve
from ahe.simulate.executor import SimulatedExecutor
from ahe.simulate.runner import write_tasks
from ahe.simulate.world import TrueChange, World, task_names


def _solves_nothing(n: int = 23) -> World:
    names = task_names(n)
    w = World(seed=3, cap=0.97, base={t: 0.0 for t in names})
    for it in (1, 2):
        for j in range(2):
            c = TrueChange(uid=f"c{it:03d}-{j + 1}-none", iteration=it, index=j, kind="neutral", predicted_fixes=[names[j]])
            w.changes[c.uid] = c
    return w


def test_an_all_fail_prior_is_not_a_coin() -> None:
    prior = fit_prior([Counts(0, 4)] * 20)
    assert (prior.a + 0) / (prior.a + prior.b + 4) < 0.05  # not 1/6 = 0.167 as under Beta(1, 1)


@pytest.mark.parametrize("policy", ["expected-value", "noise", "paper"])
def test_an_agent_that_solves_nothing_has_no_lifted_best(tmp_path: Path, policy: str) -> None:
    world = _solves_nothing()
    tasks = write_tasks(tmp_path / "tasks", len(world.base))
    cfg = ExperimentConfig(tasks=tasks, iterations=2, k=2, concurrency=1, retry_infra=0,
                           attribution=AttributionSettings(strictness=policy), debugger=DebuggerSettings(enabled=False))
    run = tmp_path / "run"
    loop = EvolutionLoop(cfg, run, executor=SimulatedExecutor(world), evolve=ScriptedEvolve(world, gate=False))
    asyncio.run(loop.run_loop(loop.prepare(resume=False), {}))
    history = (run / "history.md").read_text()
    scores = json.loads((run / "scores.json").read_text())
    assert all(s["n_passed"] == 0 for s in scores["iterations"])
    assert scores["best_pass_at_1"] in (0.0, None) and scores["best_metric_value"] in (0.0, None)
    # every "pass@1 x" history prints is a measured 0; an estimate is named as one
    for m in re.finditer(r"(estimated )?pass@1 (?:\(posterior mean, not a score\) )?([0-9.]+)", history):
        if not m.group(1):
            assert float(m.group(2)) == 0.0, m.group(0)
    final = re.search(r"loop ended: .*; best: iteration (\d+)", history)
    assert final, history
    audit = json.loads(subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(run), "--json"], capture_output=True,
                                      text=True, timeout=120).stdout)
    assert audit["best_iteration"] == int(final.group(1)) == scores["best_iteration"]
