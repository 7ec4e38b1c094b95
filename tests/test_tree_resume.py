"""`search: tree` under stress (issue 36): killed mid-tree and resumed, a budget that runs out in
the middle of a tree round, and the tree with a sealed held-out split (item 6).

Each test is a real `ahe evolve` on the demo tasks (the scripted evolve agent and mock models over
real HTTP, trials in bwrap), two rounds at k=2 so a run takes well under a minute.
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import git
import pytest

from ahe.demo import write_demo
from tests.shared_runs import ahe, evolved, judged_best, shared_build, tree_json

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def shape(run: Path) -> dict:
    """tree.json without what differs between two runs of the same script (commit ids, timestamps)."""
    t = tree_json(run)
    keys = ("id", "kind", "parent", "iteration", "changes", "merged_from", "rolled_back", "n_trials", "n_passed",
            "evaluations", "pruned", "exhausted")
    return {"nodes": [{k: n[k] for k in keys} for n in t["nodes"]], "rounds": t["rounds"], "finalists": t["finalists"],
            "merges": [(m["iteration"], m["parts"], m["node"]) for m in t["merges"]], "best": t["best"]}


def trial_results(run: Path) -> dict[Path, str]:
    return {p: p.read_text() for p in run.glob("**/rollouts/*/trial-*/result.json") if "workspace" not in p.parts}


def evolve_calls(run: Path) -> dict[Path, int]:
    """Every evolve call's transcript (the tree's children and the line's), by its write time."""
    return {p: p.stat().st_mtime_ns for p in run.glob("iterations/*/**/evolve/trajectory.json") if "workspace" not in p.parts}


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The tree demo in two rounds, never killed (built once a session, tests/shared_runs.py; read only)."""
    return shared_build(tmp_path_factory, "tree-2-rounds", lambda d: evolved(d, iterations=2, search="tree")) / "run"


# ---------------------------------------------------------------------------- 1. resume mid-tree
@pytest.mark.parametrize("kill_at", ["001/tree-child-1-evaluated",  # right after a child's evaluation
                                     "001/tree-child-2-evaluated",  # both children evaluated, before the merge
                                     "001/tree-merge-evaluated"])  # the merge evaluated, not yet recorded
def test_killed_mid_tree_resumes_without_rerunning_a_trial_or_an_evolve_call(reference, tmp_path, kill_at):
    run = tmp_path / "run"
    killed = ahe("evolve", str(write_demo(tmp_path, iterations=2, search="tree")), "--run-dir", str(run), "-q",
                 env={"AHE_KILL_AT": kill_at})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    finished, calls = trial_results(run), evolve_calls(run)
    evaluated = {p: p.read_text() for p in run.glob("iterations/001/tree/*/harness.json")}
    child = 1 if "child-1" in kill_at else 2
    assert len(calls) == 2  # a round's evolve calls all come before its children's evaluations (side by side)
    assert len(list(run.glob(f"iterations/001/tree/c{child}/rollouts/*/trial-*/result.json"))) == 6
    resumed = ahe("evolve", "--resume", str(run), "-q")
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    after = trial_results(run)
    assert {p: after[p] for p in finished} == finished  # no finished trial was run again
    assert {p: t for p, t in evolve_calls(run).items() if p in calls} == calls  # no evolve call was made again
    assert len(evolve_calls(run)) == len(evolve_calls(reference))
    assert len(after) == len(trial_results(reference))
    assert shape(run) == shape(reference)  # the same tree as the run never killed
    assert {p: p.read_text() for p in evaluated} == evaluated  # the same commits (a merge is not made again)
    tokens = json.loads((run / "scores.json").read_text())["totals"]["tokens"]
    assert tokens == json.loads((reference / "scores.json").read_text())["totals"]["tokens"]  # what was spent before the kill counts once
    t = tree_json(run)
    repo = git.Repo(run / "workspace")
    for n in t["nodes"]:  # each node's branch is its commit, and that commit is what its folders evaluated
        assert repo.commit(n["id"]).hexsha == n["commit"]
        for folder in n["evaluations"]:
            assert json.loads((run / folder / "harness.json").read_text())["commit"] == n["commit"], folder
    judged_best(run)


def test_killed_at_a_moment_inside_the_tree_round_resumes_to_the_same_tree(reference, tmp_path):
    # 3 s into iteration 1's evolve phase (the tree's round): inside an evolve call or a child's
    # trials, wherever the machine's speed puts it; every invariant below holds wherever it lands
    run = tmp_path / "run"
    killed = ahe("evolve", str(write_demo(tmp_path, iterations=2, search="tree")), "--run-dir", str(run), "-q",
                 env={"AHE_KILL_AT": "001/evolve+3"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    finished = trial_results(run)
    final = {p: t for p, t in evolve_calls(run).items()
             if json.loads((p.parent / "manifest.json").read_text() if (p.parent / "manifest.json").exists() else "{}").get("head_commit")}
    resumed = ahe("evolve", "--resume", str(run), "-q")
    assert resumed.returncode == 0, resumed.stderr
    after = trial_results(run)
    assert {p: after[p] for p in finished} == finished
    assert {p: t for p, t in evolve_calls(run).items() if p in final} == final  # a finished call is not made again
    assert shape(run) == shape(reference)
    tokens = json.loads((run / "scores.json").read_text())["totals"]["tokens"]
    assert tokens == json.loads((reference / "scores.json").read_text())["totals"]["tokens"]
    judged_best(run)


# ---------------------------------------------------------------------------- 3. a branch pruned
def test_a_pruned_node_is_never_expanded_afterwards(reference):
    t = tree_json(reference)
    pruned_in = {nid: r["iteration"] for r in t["rounds"] for nid in r["pruned"]}
    assert pruned_in == {"node-001": 2}  # the middleware branch regresses: pruned at the start of round 2
    assert all(n["pruned"] == (n["id"] in pruned_in) for n in t["nodes"])
    for nid, when in pruned_in.items():
        assert [r for r in t["rounds"] if r["iteration"] >= when and nid in r["expansions"]] == []  # no evolve call from it
        later = [n for n in t["nodes"] if n["iteration"] >= when]
        assert all(n["parent"] != nid and nid not in n["merged_from"] for n in later)  # no child, no merge takes it
        assert [m for m in t["merges"] if m["iteration"] >= when and nid in m["parts"]] == []
    assert "node-001" in t["rounds"][0]["children"]  # it was a real branch before


# ---------------------------------------------------------------------------- 2. a budget that runs out
@pytest.fixture(scope="module")
def budget_run(tmp_path_factory) -> Path:
    # with one task held out, iteration 1's line rollout spends ~2.9k agent tokens, and the tree prices
    # a child at that: 18k affords round 1's two children and its merge (which cost more: ~2.9k, ~5.2k,
    # ~5.2k), and the rest of the night no more
    return held_out_tree(tmp_path_factory, "tree-budget-18k", 3, "budgets:\n  max_tokens: {agent: 18000}\n")


def test_a_budget_that_runs_out_still_ends_with_a_judged_best(budget_run):
    run = budget_run
    best = judged_best(run)
    t = tree_json(run)
    assert "no re-evaluation (" in t["best_reason"] and "budget" in t["best_reason"], t["best_reason"]
    assert not (run / "tree-final").exists()  # a spent budget buys no re-evaluation
    assert len(t["rounds"][0]["children"]) == 2 and t["merges"][0]["node"]  # round 1 afforded both children and the merge
    assert not (run / "iterations" / "003" / "evolve").exists()  # the night ended before its last round
    # the tree's best, not the line's (the line evaluated only the seed before the budget ended it), is held out
    held = json.loads((run / "holdout" / "result.json").read_text())
    assert held["best"]["commit"] == best["commit"] != held["seed"]["commit"]
    audit = json.loads(ahe("audit", str(run), "--format", "json").stdout)
    assert "budget" in audit["stopped"] and audit["tree"]["best"] == best["id"]
    table = ahe("audit", str(run)).stdout
    assert audit["stopped"] in " ".join(table.split())


# ---------------------------------------------------------------------------- 4. held-out gains
def held_out_tree(tmp_path_factory, name: str, iterations: int, tail: str = "") -> Path:
    """The tree demo with a sealed held-out split (`holdout: {}`) and `tail` appended to its config,
    built once a session (tests/shared_runs.py; read only)."""
    return shared_build(tmp_path_factory, name, lambda d: evolved(d, "holdout: {}\n" + tail, iterations=iterations,
                                                                  search="tree")) / "run"


@pytest.fixture(scope="module")
def holdout_run(tmp_path_factory) -> Path:
    return held_out_tree(tmp_path_factory, "tree-holdout", 2)


def _files_naming(root: Path, name: str) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_file() and name.encode() in p.read_bytes())


def test_every_tree_node_is_estimated_on_the_search_split_only(holdout_run):
    run = holdout_run
    split = json.loads((run / "holdout" / "split.json").read_text())
    (held,) = split["held_out"]
    t = tree_json(run)
    assert len(t["nodes"]) == 5 and t["merges"][0]["node"] and (run / "tree-final").is_dir()
    for n in t["nodes"]:
        for folder in n["evaluations"]:  # the children, the merge, the line's rounds, the finalists
            assert sorted(json.loads((run / folder / "results.json").read_text())["tasks"]) == split["search"], folder
    assert _files_naming(run / "iterations", held) == [] and _files_naming(run / "tree-final", held) == []
    assert held not in (run / "tree.json").read_text()


def test_the_tree_best_is_scored_once_on_the_held_out_split_with_the_seed(holdout_run):
    run = holdout_run
    best = judged_best(run)
    r = json.loads((run / "holdout" / "result.json").read_text())
    repo = git.Repo(run / "workspace")
    assert r["best"]["commit"] == best["commit"] and r["seed"]["commit"] == repo.commit("iter-000").hexsha
    seed = next(n for n in tree_json(run)["nodes"] if n["kind"] == "seed")
    assert r["search_best"] == pytest.approx(best["n_passed"] / best["n_trials"])  # the node's pooled estimate
    assert r["search_seed"] == pytest.approx(seed["n_passed"] / seed["n_trials"])  # the seed pooled the same way
    for label in ("seed", "best"):  # once: one held-out task × k=2, nothing else
        assert sorted(p.parent.name for p in (run / "holdout" / label / "rollouts").glob("*/trial-*")) == split_held(run)
        assert r[label]["n_trials"] == 2
    assert (run / "history.md").read_text().count("- held-out check") == 1


def split_held(run: Path) -> list[str]:
    (held,) = json.loads((run / "holdout" / "split.json").read_text())["held_out"]
    return [held, held]


def test_audit_and_report_show_the_tree_run_s_search_and_held_out_gains(holdout_run, tmp_path):
    run = holdout_run
    r = json.loads((run / "holdout" / "result.json").read_text())
    audit = json.loads(ahe("audit", str(run), "--format", "json").stdout)
    h = audit["holdout"]
    assert h["gain_points"] == r["gain_points"] and h["search_gain_points"] == pytest.approx(
        100 * (r["search_best"] - r["search_seed"])) and "number to trust" in h["words"]
    assert audit["tree"]["best"] == tree_json(run)["best"]
    table = ahe("audit", str(run)).stdout
    assert "held-out check" in table and "gain on the search split" in table and "Search tree" in table
    report = tmp_path / "report.html"  # not into the shared run
    assert ahe("report", str(run), "--out", str(report)).returncode == 0
    html = report.read_text()
    assert 'data-split="search"' in html and 'data-split="held-out"' in html and "the number to trust" in html
