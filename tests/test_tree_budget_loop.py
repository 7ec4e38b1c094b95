"""`search: tree` under a budget in the real loop (`ahe evolve`, issue 36 item 5): the demo tasks, the
scripted evolve agent, mock models over real HTTP, `budgets.max_tokens: {agent: 58000}`.

What the demo spends (deterministic): the seed's line rollout 5,974 agent tokens, a later line
rollout 8,318; round 1's two children and merge 22,658. So round 1 affords 7 children (2 now),
round 2 one (the branches not worth their price stopped), round 3 none: the run ends there with a
judged best, inside the budget. Round 1's children are evaluated side by side (their trials
overlap in time) on the local executor."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml

from ahe.demo import write_demo
from ahe.evolution.tree.archive import load_tree
from tests.shared_runs import evolved, shared_build

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

BUDGET = 58_000


class _Run:
    def __init__(self, root: Path) -> None:
        self.root = root


def span(folder: Path) -> tuple[datetime, datetime]:
    """When the first trial of a rollout folder started and the last one ended (result.json)."""
    times = []
    for p in folder.glob("rollouts/*/trial-*/result.json"):
        r = json.loads(p.read_text())
        start = datetime.fromisoformat(r["started_at"])
        times.append((start, start + timedelta(seconds=r["duration_sec"])))
    assert times, f"no trial results under {folder}"
    return min(t[0] for t in times), max(t[1] for t in times)


def overlap(a: Path, b: Path) -> bool:
    (s1, e1), (s2, e2) = span(a), span(b)
    return s1 < e2 and s2 < e1


@pytest.fixture(scope="module")
def budget_run(tmp_path_factory) -> Path:
    """The tree demo under the budget (built once a session, tests/shared_runs.py; read only)."""
    tail = yaml.safe_dump({"budgets": {"max_tokens": {"agent": BUDGET}}})
    return shared_build(tmp_path_factory, "tree-budget-58k", lambda d: evolved(d, tail, search="tree")) / "run"


def test_the_budget_is_spent_across_branches_and_rounds_and_the_run_ends_with_a_judged_best(budget_run):
    tree = load_tree(_Run(budget_run))
    r1, r2 = tree.rounds
    assert r1.children == ["node-001", "node-002"] and "7 affordable, 2 this round" in r1.budget
    assert r1.budget.startswith("tokens (agent): 52,026 left, 5,974 kept for the next line rollout")
    # round 2: one child affordable; the seed and the merge are not worth their price next to node-002
    assert "1 affordable, 1 this round" in r2.budget and r2.expansions == ["node-002"] and not r2.merge_fits
    assert r2.children == ["node-004"] and r2.stopped == ["node-000", "node-003"]
    for nid in r2.stopped:
        why = tree.node(nid).stopped
        assert why.startswith("iteration 2: its child's expected gain per unit of budget is ")
        assert "below 0.25 of the best branch's (node-002:" in why
    assert "is 3.91e-07 pass@1 per tokens (agent) (0.0033 for one child at 8,318)" in tree.node("node-000").stopped
    assert tree.node("node-000").stopped.endswith("(node-002: 5.93e-06)")
    assert tree.node("node-002").stopped is None
    # iteration 3 judges node-004 (rolled back) within the budget; a third round would pass it, so the
    # night ends at that round boundary, best judged without a re-evaluation
    ended = "the token budget of agent (58,000) would be reached by iteration 3's edits and their evaluation"
    assert tree.best == "node-002" and f"no re-evaluation ({ended}" in tree.best_reason
    history = (budget_run / "history.md").read_text()
    assert f"- loop ended: {ended}" in history
    assert "search tree budget, iteration 2: " in history and "; stopped node-000, node-003" in history
    scores = json.loads((budget_run / "scores.json").read_text())
    spent = sum(s["tokens"].get("agent", 0) for s in scores["iterations"])
    assert spent == 53_634 <= BUDGET and [s["iteration"] for s in scores["iterations"]] == [1, 2, 3]
    assert "evolve" not in scores["iterations"][2]["tokens"]  # no third round: no evolve call in iteration 3


def test_the_audit_shows_a_stopped_branch_with_its_reason(budget_run):
    audit = json.loads(subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(budget_run), "--format", "json"],
                                      capture_output=True, text=True, timeout=120, check=True).stdout)
    nodes = {n["id"]: n for n in audit["tree"]["nodes"]}
    assert "stopped (iteration 2: its child's expected gain per unit of budget" in nodes["node-000"]["status"]
    assert "stopped" not in nodes["node-002"]["status"] and nodes["node-002"]["status"].startswith("best")


def test_a_rounds_children_are_evaluated_side_by_side_on_the_local_executor(budget_run):
    tree_dir = budget_run / "iterations" / "001" / "tree"
    assert overlap(tree_dir / "c1", tree_dir / "c2"), "round 1's children were evaluated one after the other"


def test_killed_while_the_children_are_evaluated_side_by_side_resumes_without_rerunning_a_finished_trial(tmp_path):
    cfg = write_demo(tmp_path / "exp", search="tree", iterations=1)
    run = tmp_path / "run"
    env = {**os.environ, "AHE_KILL_AT": "001/tree-child-1-evaluated"}
    killed = subprocess.run([sys.executable, "-m", "ahe.cli", "evolve", str(cfg), "--run-dir", str(run), "-q"],
                            capture_output=True, text=True, timeout=400, env=env)
    assert killed.returncode != 0, "the fault was not injected"
    tree_dir = run / "iterations" / "001" / "tree"
    finished = {p: p.read_text() for p in tree_dir.glob("c*/rollouts/*/trial-*/result.json")}
    assert len(list(tree_dir.glob("c1/rollouts/*/trial-*/result.json"))) == 6  # child 1 was evaluated whole
    calls = {p: p.read_text() for p in tree_dir.glob("c*/evolve/manifest.json")}
    assert len(calls) == 2
    resumed = subprocess.run([sys.executable, "-m", "ahe.cli", "evolve", "--resume", str(run), "-q"],
                             capture_output=True, text=True, timeout=400, env=dict(os.environ))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for path, text in {**finished, **calls}.items():  # no finished trial run again, no evolve call made again
        assert path.read_text() == text, path
    tree = load_tree(_Run(run))
    assert tree.rounds[0].children == ["node-001", "node-002"] and tree.best is not None
    assert [len(list(tree_dir.glob(f"{c}/rollouts/*/trial-*/result.json"))) for c in ("c1", "c2")] == [6, 6]
    assert tree.node("node-001").n_trials == 6 and tree.node("node-002").n_trials >= 6
