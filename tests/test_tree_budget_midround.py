"""`search: tree`: a budget crossed inside a round (issue 36: "budget exhaustion mid-round (the run
still ends with a judged best)"), for real: a round starts only the children its allocation affords,
so here a child costs far more than forecast — the scripted model reports many more tokens for one
call than the run measured before — and the budget is crossed while the round's children run.

Each case is a real `ahe evolve` of the demo tree (two rounds at k=2; it ends after round 1):
- an evolve call that overshoots a `total` budget: the round's next evolve call, the evaluation of
  the child already made and the merge are never started;
- a child's evaluation that overshoots an `agent` budget (the middleware child's Y trials, side by
  side with the other child's): both children are evaluated, the merge is never started.
Either way the run ends with a judged `best` from what was evaluated (not re-evaluated), and
tree.json, history.md and `ahe audit` say the budget ran out mid-round and by how much.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
from pathlib import Path

import pytest
import yaml

from ahe.demo import STRICT_NOTE, write_demo
from tests.shared_runs import ahe, judged_best, tree_json

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

HUGE = 6_000_000  # the scripted evolve call's prompt tokens: 4x the bill's forecast for one call (~1.5M)


def _policy(path: Path) -> tuple[str, dict]:
    header, _, body = path.read_text().partition("\n")
    return header, yaml.safe_load(body)


def _overshooting_evolve_call(d: Path) -> None:
    """Round 1's tree child 1: its last turn (`finish`) reports HUGE prompt tokens (what it does is unchanged)."""
    path = d / "policies" / "evolve.yaml"
    header, pol = _policy(path)
    mine = [r for r in pol["rules"] if r["match"].get("first_user_contains") == ["Iteration 1.", "tree child 1 of 2"]]
    max(mine, key=lambda r: r["match"]["turn"])["usage"] = {"prompt_tokens": HUGE}
    path.write_text(header + "\n" + yaml.safe_dump(pol, sort_keys=False, width=200))


def _overshooting_evaluation(d: Path) -> None:
    """The code agent, told by the middleware that its command is refused, answers with 30k prompt tokens:
    only the middleware child's Y trials cost that much (the seed's rollout measured ~6k for all six)."""
    path = d / "policies" / "agent.yaml"
    header, pol = _policy(path)
    pol["rules"].insert(0, {"name": "refused: a long answer", "match": {"last_tool_result_contains": STRICT_NOTE},
                            "reply": "Done.", "usage": {"prompt_tokens": 30_000}})
    path.write_text(header + "\n" + yaml.safe_dump(pol, sort_keys=False, width=200))


CASES = {
    # with the bill's ~1.5M tokens for an evolve call before the first, 5M affords 3 children: 2 in round 1
    "evolve-call": ("total: 5000000", _overshooting_evolve_call),
    # the seed's rollout (~6k) prices a child's evaluation: 36k affords 4, 2 in round 1, and the merge
    "evaluation": ("agent: 36000", _overshooting_evaluation),
}


def _config(d: Path, case: str) -> Path:
    budget, script = CASES[case]
    cfg = write_demo(d, iterations=2, search="tree")
    script(d)
    cfg.write_text(cfg.read_text() + f"budgets:\n  max_tokens: {{{budget}}}\n")
    return cfg


@pytest.fixture(scope="module", params=sorted(CASES))
def crossed_run(request, tmp_path_factory) -> tuple[str, Path]:
    d = tmp_path_factory.mktemp(request.param)
    proc = ahe("evolve", str(_config(d, request.param)), "--run-dir", str(d / "run"), "-q")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return request.param, d / "run"


def _over(words: str) -> tuple[int, int, int]:
    m = re.search(r"token budget of \w+ \(([\d,]+)\) reached: ([\d,]+) spent, ([\d,]+) over", words)
    assert m, words
    return tuple(int(g.replace(",", "")) for g in m.groups())  # type: ignore[return-value]


def test_a_budget_crossed_mid_round_starts_nothing_more_and_ends_with_a_judged_best(crossed_run):
    case, run = crossed_run
    t = tree_json(run)
    r1 = t["rounds"][0]
    assert r1["budget"] and "2 this round" in r1["budget"]  # the allocation afforded two children: the crossing is mid-round
    assert len(t["rounds"]) == 1 and not (run / "iterations" / "002" / "evolve").exists()  # no other round began
    tree = run / "iterations" / "001" / "tree"
    assert not (tree / "merge").exists()  # the merge was never started
    if case == "evolve-call":
        assert not (tree / "c2").exists()  # tree child 2's evolve call was never made
        assert not list((tree / "c1").glob("rollouts/*/trial-*/result.json"))  # nor child 1's evaluation
        assert [n["id"] for n in t["nodes"]] == ["node-000"] and r1["children"] == [None, None]
        assert r1["not_started"] == ["tree child 2's evolve call", "tree child 1's evaluation", "the merge"]
        assert r1["crossed"].endswith("(after tree child 1's evolve call)")
    else:
        for c in ("c1", "c2"):  # both children's evaluations ran (side by side) to their end: every trial kept
            assert len(list((tree / c).glob("rollouts/*/trial-*/result.json"))) == 6
        assert r1["children"] == ["node-001", "node-002"]
        assert r1["crossed"].endswith("(after the children's evaluations)") and r1["not_started"] == ["the merge"]
    limit, spent, over = _over(r1["crossed"])
    totals = json.loads((run / "scores.json").read_text())["totals"]["tokens"]
    role = "total" if case == "evolve-call" else "agent"
    assert spent == totals[role] and over == spent - limit > 0  # by how much, as scores.json counts it
    best = judged_best(run)  # a judged best, from what was evaluated
    assert best["n_trials"] > 0
    assert "no re-evaluation" in t["best_reason"] and not (run / "tree-final").exists()
    history = (run / "history.md").read_text()
    said = f"{r1['crossed']}; not started: {', '.join(r1['not_started'])}"
    assert f"search tree budget, iteration 1: {said}" in history
    ended = next(line for line in history.splitlines() if line.startswith("- loop ended:"))
    tail = said[said.index(" (after "):]  # the loop's reason says where and what, the amounts once
    assert f"over; crossed mid-round in iteration 1's tree round{tail}; best: {best['id']}" in ended
    audit = json.loads(ahe("audit", str(run), "--format", "json").stdout)
    assert "mid-round" in audit["stopped"] and _over(audit["stopped"]) == (limit, spent, over)
    assert audit["tree"]["rounds"][0]["crossed"] == r1["crossed"] and audit["tree"]["best"] == best["id"]
    assert f"budget, round 1: {said}" in " ".join(ahe("audit", str(run)).stdout.split())  # the table's view says it too


@pytest.mark.parametrize("crossed_run", ["evaluation"], indirect=True)
def test_a_round_killed_after_the_crossing_resumes_to_the_same_end(crossed_run, tmp_path):
    _, reference = crossed_run
    run = tmp_path / "run"
    killed = ahe("evolve", str(_config(tmp_path, "evaluation")), "--run-dir", str(run), "-q",
                 env={"AHE_KILL_AT": "001/tree-child-2-evaluated"})  # the budget already crossed, nothing recorded yet
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = ahe("evolve", "--resume", str(run), "-q")
    assert resumed.returncode == 0, resumed.stderr
    t, ref = tree_json(run), tree_json(reference)
    assert {k: t["rounds"][0][k] for k in ("children", "crossed", "not_started")} == \
        {k: ref["rounds"][0][k] for k in ("children", "crossed", "not_started")}
    assert not (run / "iterations" / "001" / "tree" / "merge").exists()

    def ended(r: Path) -> str:  # the reason, without the best's commit id (a new clone, a new id)
        line = next(ln for ln in (r / "history.md").read_text().splitlines() if ln.startswith("- loop ended:"))
        return re.sub(r"\([0-9a-f]{10}\)", "(…)", line)
    assert ended(run) == ended(reference)
    totals = json.loads((run / "scores.json").read_text())["totals"]["tokens"]
    assert totals == json.loads((reference / "scores.json").read_text())["totals"]["tokens"]  # the round's spend, once
    judged_best(run)
