"""`search: tree` under `budgets.max_trials`: can a round start a child's evaluation (or the merge) that
crosses the trial budget mid-round? No: unlike tokens, a round's trials are known before it starts — a
child's evaluation round is exactly this round's line rollout (the same tasks × k; an evolve call runs
no trial), the round makes only the children `allocate` affords with the next line rollout, its
re-evaluation and the held-out trials kept free, the merge only if one more round still fits after
them, and a resumed round keeps its allocation (tree.json) and re-runs only trials without a result.

So the promise of docs/config.md (`budgets.max_trials`: every trial counts; the tree buys only the
children that fit, the finalists only while a round fits) is checked here on real `ahe evolve` runs of
the demo tree at budgets that leave remainders (not multiples of a round's 6 trials) and cut the run
at different places: the run's trials never exceed the budget, each round's children and merge fit
in what its allocation said was left, and the run ends with a judged `best`.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ahe.demo import write_demo
from ahe.evolution.bill import count_trials_spent
from ahe.run_folder import RunFolder
from tests.shared_runs import ahe, judged_best, tree_json

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

ROUND = 6  # the demo's trials per evaluation round: 3 tasks × k=2


@pytest.fixture(scope="module", params=[27, 47])
def budget_run(request, tmp_path_factory) -> tuple[int, Path]:
    d = tmp_path_factory.mktemp(f"trials-{request.param}")
    cfg = write_demo(d, search="tree")
    cfg.write_text(cfg.read_text() + f"budgets:\n  max_trials: {request.param}\n")
    proc = ahe("evolve", str(cfg), "--run-dir", str(d / "run"), "-q")
    assert proc.returncode == 0, proc.stderr
    return request.param, d / "run"


def _evaluated(folder: Path) -> int:
    return len(list(folder.glob("rollouts/*/trial-*/result.json")))


def test_a_tree_round_never_starts_an_evaluation_past_the_trial_budget(budget_run):
    budget, run = budget_run
    spent = count_trials_spent(RunFolder(run))
    assert 0 < spent <= budget
    t = tree_json(run)
    assert t["rounds"], "the budget affords at least one round"
    for r in t["rounds"]:
        m = re.match(r"trials: ([\d,]+) left, ([\d,]+) kept for the next line rollout; a child costs 6 ", r["budget"] or "")
        assert m, r["budget"]
        left, kept = (int(g.replace(",", "")) for g in m.groups())
        tree = run / "iterations" / f"{r['iteration']:03d}" / "tree"
        used = sum(_evaluated(c) for c in tree.glob("c*")) + (_evaluated(tree / "merge") if (tree / "merge").is_dir() else 0)
        assert used % ROUND == 0 and used <= max(0, left - kept)  # every evaluation whole, none into the kept trials
        assert r["crossed"] is None and r["not_started"] == []  # nothing had to be cut short mid-round
    best = judged_best(run)
    history = (run / "history.md").read_text()
    ended = next(line for line in history.splitlines() if line.startswith("- loop ended:"))
    assert f"best: {best['id']} " in ended
