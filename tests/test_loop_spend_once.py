"""A phase's spend counts once (issue 36): the loop saves a phase's tokens to scores.json before it
marks the phase done in loop_state.json, so a kill between the two makes a resumed run redo the
phase — and, before, add its spend a second time (every strategy: debug, explore, evolve, the
variants' and a tree's children's evaluation). The add is keyed by phase: the redo replaces it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ahe.config import load_experiment_config
from ahe.demo import write_demo
from ahe.evolution.loop import EvolutionLoop
from ahe.llm.types import Usage
from ahe.run_folder import IterationScore, LoopState, RunFolder, Scores


def _loop(tmp: Path) -> EvolutionLoop:
    return EvolutionLoop(load_experiment_config(write_demo(tmp / "demo", search="tree")), tmp / "run")


def _seed_run(tmp: Path) -> None:
    """A run after iteration 1's rollout and debug: 6,000 agent tokens, 900 debugger tokens."""
    run = RunFolder(tmp / "run")
    run.root.mkdir(parents=True)
    run.save_state(LoopState(done={"001": ["rollout", "attribution", "rollback", "debug", "explore"]}))
    run.save_scores(Scores(iterations=[IterationScore(iteration=1, harness_commit="c0", harness_tag="iter-000", pass_at_1=0.5,
                                                      pass_at_k=0.5, k=2, n_trials=6, n_passed=3, infra_errors=0,
                                                      tokens={"agent": 6000, "debugger": 900}, cost_usd={"agent": 0.06})]))


def _evolve_phase_spends(loop: EvolutionLoop, scores: Scores, evolve: int, children: int) -> None:
    """What the loop's evolve phase records, in its order, each saved to scores.json at once."""
    loop._add_usage(scores, 1, "evolve", "evolve", Usage(prompt_tokens=evolve))
    loop._add_usage(scores, 1, "evolve", "agent", Usage(prompt_tokens=children, cost_usd=0.03))
    loop._add_usage(scores, 1, "evolve", "variants", Usage(prompt_tokens=children, cost_usd=0.03))


@pytest.mark.parametrize("redo", [(30_000, 12_000), (31_000, 12_500)])  # the redo spends the same, or (a remade call) not
def test_a_phase_killed_after_saving_its_spend_counts_it_once_on_resume(tmp_path, redo):
    _seed_run(tmp_path)
    first = _loop(tmp_path)
    scores = first.run.load_scores()
    _evolve_phase_spends(first, scores, 30_000, 12_000)
    # killed here: scores.json has the evolve phase's spend, loop_state.json does not mark it done
    assert not first.run.load_state().is_done(1, "evolve")
    on_disk = first.run.load_scores().get(1)
    assert on_disk.tokens == {"agent": 18_000, "debugger": 900, "evolve": 30_000}
    resumed = _loop(tmp_path)  # a new process: everything from the run folder
    scores = resumed.run.load_scores()
    _evolve_phase_spends(resumed, scores, *redo)
    score = resumed.run.load_scores().get(1)
    evolve, children = redo
    assert score.tokens == {"agent": 6000 + children, "debugger": 900, "evolve": evolve}  # the phase once: its redo
    assert score.cost_usd["agent"] == pytest.approx(0.06 + 0.03)
    assert score.variant_tokens == children and score.variant_cost_usd == pytest.approx(0.03)
    assert resumed.run.load_scores().totals()["tokens"]["total"] == 6000 + 900 + evolve + children


def test_different_phases_still_add_up(tmp_path):
    _seed_run(tmp_path)
    loop = _loop(tmp_path)
    scores = loop.run.load_scores()
    loop._add_usage(scores, 1, "explore", "evolve", Usage(prompt_tokens=100))  # (no role shares two phases today)
    loop._add_usage(scores, 1, "evolve", "evolve", Usage(prompt_tokens=200))
    loop._add_usage(scores, 1, "debug", "debugger", Usage(prompt_tokens=50))  # adds to the rollout-era 900 once
    loop._add_usage(scores, 1, "debug", "debugger", Usage(prompt_tokens=50))
    score = loop.run.load_scores().get(1)
    assert score.tokens["evolve"] == 300 and score.tokens["debugger"] == 950
