"""`search: tree` and `budgets.wall_clock_hours` (issue 36: "budget exhaustion mid-round (the run still
ends with a judged best)"): a tree round checks the run's wall time — the loop's clock, counted across
resumes, handed down as `PhaseContext.elapsed` — before each evolve call, each child's evaluation and
the merge, as it checks token and dollar budgets (docs/search.md "A budget crossed mid-round").

The real case is an `ahe evolve` of the demo tree whose round-1 tree child 1's evolve call is slow
(the scripted model's last turn answers after LATENCY seconds, set at the test's boundary: the
policy's `latency_sec`): the phases before it fit in the budget, the call crosses it, and the round
starts nothing more.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from ahe.config import Budgets
from ahe.evolution.budget_spent import wall_clock_spent
from ahe.evolution.tree.archive import RoundRecord, Tree, save_tree
from ahe.evolution.tree.crossing import RoundSpend, clock_crossed, mid_round, words
from ahe.llm.types import Usage
from ahe.run_folder import RunFolder
from tests.shared_runs import ahe, judged_best, tree_json

HOURS = 0.015  # 54 s: the seed's rollout and the debugger take ~5 s (at load 4 on 2 cores) before the first evolve call
LATENCY = 54.0  # the first evolve call's last turn alone reaches the budget


def test_the_wall_clock_is_said_in_one_sentence_and_stops_a_round_whatever_the_role():
    b = Budgets(wall_clock_hours=0.5)
    assert wall_clock_spent(b, 1799.9) is None and wall_clock_spent(Budgets(), 10**9) is None
    assert wall_clock_spent(b, 1800.0) == "wall-clock budget of 0.5 h reached"
    now = [100.0]
    rec = RoundRecord(iteration=2)
    spend = RoundSpend(b, {"tokens": {}, "cost_usd": {}}, rec, elapsed=lambda: now[0])
    assert not spend.skip("evolve", "tree child 1's evolve call", "the line rollout")
    spend.add("evolve", Usage(prompt_tokens=10**9))  # no token budget: tokens never cross anything
    assert not spend.skip("agent", "tree child 1's evaluation", "the round's evolve calls")
    now[0] = 1800.0
    assert spend.skip("evolve", "tree child 2's evolve call", "tree child 1's evolve call")
    assert spend.skip("agent", "the merge", "the children's evaluations")  # the clock counts every role
    assert words(rec) == ("wall-clock budget of 0.5 h reached (after tree child 1's evolve call); "
                          "not started: tree child 2's evolve call, the merge")
    now[0] = 0.0  # a resumed session whose clock lost the killed phase's time: what was not started stays so
    assert spend.skip("evolve", "tree child 2's evolve call", "tree child 1's evolve call")
    assert not spend.skip("agent", "tree child 1's evaluation", "the round's evolve calls")


def test_a_round_that_crossed_the_clock_ends_the_run_whatever_a_resumed_clock_reads(tmp_path):
    run = RunFolder(tmp_path / "run")
    run.root.mkdir()
    clock = RoundRecord(iteration=1, crossed="wall-clock budget of 0.01 h reached (after tree child 1's evolve call)",
                        not_started=["tree child 2's evolve call"])
    tokens = RoundRecord(iteration=2, crossed="token budget of total (5,000,000) reached: 6,031,655 spent, "
                                              "1,031,655 over (after the line rollout)", not_started=["tree child 1's evolve call"])
    save_tree(run, Tree(rounds=[clock, tokens, RoundRecord(iteration=3)]))
    assert clock_crossed(run, 1) == "wall-clock budget of 0.01 h reached"  # the loop's reason, without the round's tail
    assert clock_crossed(run, 2) is None and clock_crossed(run, 3) is None and clock_crossed(run, 4) is None
    assert mid_round(run, 1) == ("; crossed mid-round in iteration 1's tree round (after tree child 1's evolve call); "
                                 "not started: tree child 2's evolve call")


def _slow_first_evolve_call(d: Path) -> None:
    path = d / "policies" / "evolve.yaml"
    header, _, body = path.read_text().partition("\n")
    pol = yaml.safe_load(body)
    mine = [r for r in pol["rules"] if r["match"].get("first_user_contains") == ["Iteration 1.", "tree child 1 of 2"]]
    assert mine, "the demo's tree child 1 of round 1 has its own scripted turns"
    max(mine, key=lambda r: r["match"]["turn"])["latency_sec"] = LATENCY
    path.write_text(header + "\n" + yaml.safe_dump(pol, sort_keys=False, width=200))


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_wall_clock_budget_crossed_by_an_evolve_call_starts_nothing_more_and_ends_with_a_judged_best(tmp_path):
    from ahe.demo import write_demo

    cfg = write_demo(tmp_path, iterations=2, search="tree")
    _slow_first_evolve_call(tmp_path)
    cfg.write_text(cfg.read_text() + f"budgets:\n  wall_clock_hours: {HOURS}\n")
    run = tmp_path / "run"
    proc = ahe("evolve", str(cfg), "--run-dir", str(run), "-q")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    t = tree_json(run)
    assert len(t["rounds"]) == 1 and not (run / "iterations" / "002" / "evolve").exists()  # no other round began
    r1 = t["rounds"][0]
    tree = run / "iterations" / "001" / "tree"
    assert (tree / "c1" / "evolve" / "manifest.json").exists()  # the slow call finished and counts
    assert not (tree / "c2").exists() and not (tree / "merge").exists()
    assert not list((tree / "c1").glob("rollouts/*/trial-*/result.json"))  # its child was never evaluated
    assert r1["crossed"] == f"wall-clock budget of {HOURS} h reached (after tree child 1's evolve call)"
    assert r1["not_started"] == ["tree child 2's evolve call", "tree child 1's evaluation", "the merge"]
    assert r1["children"] == [None, None] and [n["id"] for n in t["nodes"]] == ["node-000"]
    scores = json.loads((run / "scores.json").read_text())
    assert scores["totals"]["tokens"]["evolve"] > 0  # the call that crossed is billed
    best = judged_best(run)  # the seed, judged on its rollout, not re-evaluated (the budget is spent)
    assert best["id"] == "node-000" and "no re-evaluation" in t["best_reason"] and not (run / "tree-final").exists()
    history = (run / "history.md").read_text()
    said = f"{r1['crossed']}; not started: {', '.join(r1['not_started'])}"
    assert f"search tree budget, iteration 1: {said}" in history
    ended = next(line for line in history.splitlines() if line.startswith("- loop ended:"))
    assert ended.startswith(f"- loop ended: wall-clock budget of {HOURS} h reached; crossed mid-round in iteration 1's "
                            f"tree round (after tree child 1's evolve call); not started: tree child 2's evolve call, "
                            f"tree child 1's evaluation, the merge; best: node-000")
    state = json.loads((run / "loop_state.json").read_text())
    assert state["elapsed_sec"] >= HOURS * 3600
