"""The bill of a search tree (issue 36): bill.json's last entry counts the finalists' re-evaluation,
which runs after the loop's last phase (ahe/evolution/tree/finish.py) — on `ahe demo DIR --search
tree` 72 trials, as many as ran (before: 60, the last phase's entry). The finalists' trials are agent
trials: scores.json counts their tokens under `agent` (their share: `spent_by_phase["finish/agent"]`),
so an agent budget sees them — one the finalists reach leaves the next finalist unstarted, and says so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ahe.demo import write_demo
from ahe.evolution.bill import load_bill
from ahe.rollout.models import RunResults
from ahe.run_folder import RunFolder
from tests import shared_runs
from tests.shared_runs import ahe, judged_best, tree_json

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

AGENT_BUDGET = 90_000  # the demo tree's rounds spend 83,984 agent tokens under it, each finalist ~9.7k more


def _tokens(results: Path) -> int:
    return RunResults.model_validate_json(results.read_text()).usage.total_tokens


def _every_evaluation(run: Path) -> int:
    return sum(_tokens(p) for p in run.glob("**/results.json") if "workspace" not in p.parts and "holdout" not in p.parts)


def test_the_bill_s_last_entry_counts_the_tree_s_final_re_evaluation(tmp_path_factory):
    demo = shared_runs.tree_demo(tmp_path_factory)
    run = demo / "run"
    folder = RunFolder(run)
    bill, scores = load_bill(folder), folder.load_scores()
    trials = [p for p in run.glob("**/trial-*/result.json") if "workspace" not in p.parts]
    final = [p for p in trials if p.relative_to(run).parts[0] == "tree-final"]
    assert len(final) == 12 and len(trials) == 72  # two finalists × 3 tasks × k=2, after the 60 of the rounds
    last = bill.entries[-1]
    assert last.phase == "end" and last.trials.spent == 72 and bill.entries[-2].trials.spent == 60
    assert last.trials.projected.low == last.trials.projected.high == 72  # nothing left to run at the end
    # the finalists' tokens: agent tokens of the last iteration in scores.json (set from their folders), no pseudo-role
    finalists = sum(_tokens(run / "tree-final" / nid / "results.json") for nid in tree_json(run)["finalists"])
    totals = scores.totals()["tokens"]
    last_score = scores.iterations[-1]
    assert finalists > 0 and "finalists" not in totals and last_score.spent_by_phase["finish/agent"][0] == finalists
    every = _every_evaluation(run)
    assert last.tokens["agent"].spent == totals["agent"] == every  # every evaluation's tokens, once, under agent
    assert last.tokens["total"].spent == totals["total"]
    check = {c.quantity: c for c in bill.check}
    assert check["trials"].actual == 72 and check["tokens:agent"].actual == every
    lines = [ln for ln in (demo.parent / "stderr.txt").read_text().splitlines() if ln.strip().startswith("bill: ")]
    assert len(lines) == len(bill.entries) and " 72 of 72 (72–72) trials" in lines[-1]
    audit = json.loads(ahe("audit", str(run), "--format", "json").stdout)
    assert audit["bill"]["latest"]["tokens"]["agent"]["spent"] == every


@pytest.fixture(scope="module")
def finalists_over_budget(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("finalists-budget")
    cfg = write_demo(d, search="tree")
    cfg.write_text(cfg.read_text() + f"budgets:\n  max_tokens: {{agent: {AGENT_BUDGET}}}\n")
    proc = ahe("evolve", str(cfg), "--run-dir", str(d / "run"), "-q")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return d / "run"


def test_an_agent_budget_the_finalists_reach_starts_no_further_finalist_and_says_so(finalists_over_budget):
    run = finalists_over_budget
    t, scores = tree_json(run), RunFolder(run).load_scores()
    first, second = t["finalists"]
    rounds = sum(s.tokens["agent"] for s in scores.iterations) - scores.iterations[-1].spent_by_phase["finish/agent"][0]
    assert rounds < AGENT_BUDGET  # the rounds stayed inside it: the run finished all its iterations
    finalist = _tokens(run / "tree-final" / first / "results.json")
    spent = int(rounds + finalist)
    assert spent > AGENT_BUDGET and not (run / "tree-final" / second).exists()  # the first crossed it, the second never began
    assert scores.totals()["tokens"]["agent"] == spent == _every_evaluation(run)
    said = f"token budget of agent ({AGENT_BUDGET:,}) reached: {spent:,} spent, {spent - AGENT_BUDGET:,} over"
    assert t["best_reason"].endswith(f"; re-evaluated {first}; not {second} (a spent budget: {said})")
    judged_best(run)
    history = (run / "history.md").read_text()
    assert f"not {second} (a spent budget: {said})" in history and "- loop ended: finished all iterations" in history
    audit = json.loads(ahe("audit", str(run), "--format", "json").stdout)
    assert audit["bill"]["latest"]["tokens"]["agent"]["spent"] == spent  # the bill counts them as agent, once
    assert audit["tree"]["best"] == t["best"]
