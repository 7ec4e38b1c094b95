"""`budgets.max_trials` (issue 36 item 5: "a run given a budget (trials, tokens or dollars)"): every
trial the run makes counts — line rollouts, re-evaluations, variants, the tree's children, merges and
finalists, the held-out scoring. The loop stops ahead of a round that would cross it; `search: tree`
buys only the children it can afford and re-evaluates only the finalists that still fit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ahe.config import ExperimentConfig
from ahe.demo import write_demo
from ahe.evolution.bill import budget_ahead, count_trials_spent
from ahe.evolution.tree.archive import load_tree
from ahe.run_folder import RunFolder
from ahe.run_folder.records import IterationScore, Scores

BUDGET = 66  # the tree demo runs 72 trials without a budget: 60 in its rounds, 12 on its two finalists


def _score(it: int, n_trials: int, reeval: int = 0) -> IterationScore:
    return IterationScore(iteration=it, harness_commit="c", harness_tag="t", pass_at_1=0.5, pass_at_k=0.5, k=2,
                          n_trials=n_trials, n_passed=1, infra_errors=0, reeval_trials=reeval)


def test_the_line_stops_before_a_round_that_would_cross_the_trial_budget(tmp_path):
    (tmp_path / "t").mkdir()
    cfg = ExperimentConfig(tasks=tmp_path / "t", budgets={"max_trials": 20})
    scores = Scores(iterations=[_score(1, 6), _score(2, 6, reeval=2)])
    assert budget_ahead(cfg, scores, 2, 0.0, trials_spent=12) is None  # 12 + 6 + 2 = 20: fits exactly
    said = budget_ahead(cfg, scores, 2, 0.0, trials_spent=13)
    assert said and said.startswith("the trial budget (20) would be crossed by iteration 2's edits")
    assert "13 run, 8 more projected from iteration 1" in said
    assert "held-out" in budget_ahead(cfg, scores, 2, 0.0, trials_spent=10, reserve_trials=4)  # 10 + 8 + 4 > 20
    variants = cfg.model_copy(update={"variants": 3})  # three variants evaluated on a round each: 18 more
    assert budget_ahead(variants, scores, 2, 0.0, trials_spent=0) is not None
    assert budget_ahead(variants, scores, 2, 0.0, trials_spent=0, search_allocates=True) is None


def test_every_finished_trial_counts_once_and_nothing_inside_a_trial_or_a_clone(tmp_path):
    run = RunFolder(tmp_path / "run")

    def trial(rel: str, finished: bool = True) -> None:
        d = run.root / rel
        d.mkdir(parents=True)
        if finished:
            (d / "result.json").write_text("{}")

    trial("iterations/001/rollouts/a/trial-1")
    trial("iterations/001/rollouts/a/trial-2", finished=False)  # killed before its result: not a finished trial
    trial("iterations/001/reeval/a/iter-000/trial-3")
    trial("iterations/002/tree/c1/rollouts/a/trial-1")
    trial("iterations/002/variants/v1/rollouts/b/trial-1")
    trial("iterations/002/tree/c1/workspace/fixtures/trial-9")  # a file of the harness clone, not a trial
    trial("iterations/001/rollouts/a/trial-1/root/trial-4")  # inside the trial's sandbox files
    trial("tree-final/node-002/rollouts/a/trial-1")
    trial("holdout/best/rollouts/a/trial-1")
    assert count_trials_spent(run) == 6


def test_the_plan_says_where_the_trial_budget_is_reached(tmp_path):
    cfg = write_demo(tmp_path)
    data = yaml.safe_load(cfg.read_text())
    data["budgets"] = {"max_trials": 14}
    cfg.write_text(yaml.safe_dump(data))
    out = subprocess.run([sys.executable, "-m", "ahe.cli", "plan", str(cfg)], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "COLUMNS": "250"})
    assert out.returncode == 0, out.stderr
    assert "the trial budget (14) is reached in iteration 3 (after its rollout) of 3" in out.stdout


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_tree_under_a_trial_budget_buys_children_it_can_afford_and_never_crosses_it(tmp_path):
    cfg = write_demo(tmp_path, search="tree")
    data = yaml.safe_load(cfg.read_text())
    data["budgets"] = {"max_trials": BUDGET}
    cfg.write_text(yaml.safe_dump(data))
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "evolve", str(cfg), "--run-dir", str(run), "-q"],
                          capture_output=True, text=True, timeout=400, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert count_trials_spent(RunFolder(run)) == BUDGET  # inside the budget, and all of it used

    class _Run:
        root = run

    tree = load_tree(_Run())
    # a child costs one round of 6 trials, no trial for its evolve call; the next line rollout stays free
    assert [r.budget.split(";")[0] for r in tree.rounds] == [
        "trials: 60 left, 6 kept for the next line rollout", "trials: 36 left, 6 kept for the next line rollout",
        "trials: 18 left, 6 kept for the next line rollout"]
    assert all("a child costs 6 (0 evolve call + 6 evaluation)" in r.budget for r in tree.rounds)
    # the rounds end inside the budget; of the two finalists only the first still fits, and the audit says so
    assert tree.finalists == ["node-007", "node-002"]
    assert "re-evaluated node-007; not node-002 (the trial budget of 66 leaves no round for it)" in tree.best_reason
    assert not (run / "tree-final" / "node-002").exists()
    history = (run / "history.md").read_text()
    assert "- loop ended: finished all iterations; best: node-007" in history
