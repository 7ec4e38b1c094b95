"""`search: tree` in the real loop (`ahe evolve`, issue 36): the demo tasks, the scripted evolve
agent and mock models over real HTTP. The archive (tree.json) must survive between rounds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from ahe.evolution.tree.archive import Node, Tree, load_tree
from ahe.harness.manifest import ChangeEntry, Manifest
from ahe.run_folder import RunFolder
from tests import shared_runs

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _entry(cid: str) -> ChangeEntry:
    return ChangeEntry(id=cid, component="long_term_memory", files=["LongTermMEMORY.md"], summary="a lesson on output formats",
                       failure_evidence=[{"task": "t", "ref": "r", "note": "the agent stopped early"}],
                       root_cause="the agent ends too early", targeted_fix="a standing lesson",
                       why_this_component="a general habit", predicted_fixes=["t"])


def test_a_tree_with_tree_unique_change_ids_reads_back(tmp_path):
    # the bug: n002-chg-1 broke ChangeEntry's id pattern, so tree.json (and the round's manifest)
    # read back as None and every round started a new tree; attribution saw no changes
    tree = Tree(nodes=[Node(id="node-002", commit="c" * 40, changes=["n002-chg-1"], entries=[_entry("n002-chg-1")])])
    back = Tree.model_validate_json(tree.model_dump_json())
    assert back.nodes[0].entries[0].id == "n002-chg-1"
    assert Manifest(iteration=1, base_commit="a", changes=[_entry("n002-chg-1"), _entry("n001-chg-3")]).next_id() == "chg-4"
    with pytest.raises(ValueError):
        _entry("node-2-chg-1")


def test_the_digest_lists_what_other_branches_tried_not_what_the_parent_holds():
    from ahe.evolution.tree.children import digest

    mw = _entry("n001-chg-1").model_copy(update={"component": "middleware", "files": ["agent.yaml"], "summary": "strict mode"})
    seed = Node(id="node-000", commit="0" * 40, kind="seed", n_trials=6, n_passed=2)
    one = Node(id="node-001", commit="1" * 40, parent="node-000", changes=["n001-chg-1"], entries=[mw], n_trials=6, pruned=True)
    two = Node(id="node-002", commit="2" * 40, parent="node-000", changes=["n002-chg-1"], entries=[_entry("n002-chg-1")],
               n_trials=6, n_passed=4)
    merge = Node(id="node-003", commit="3" * 40, parent="node-002", kind="merge", merged_from=["node-001"],
                 changes=["n001-chg-1"], entries=[mw, _entry("n002-chg-1")], n_trials=6, n_passed=2)
    text = digest(Tree(nodes=[seed, one, two, merge]), two)
    assert text.splitlines() == ["- node-001 (1111111111): n001-chg-1 [middleware] strict mode — pruned",
                                 "- node-003 (3333333333): n001-chg-1 [middleware] strict mode — estimate 0.38"]


@pytest.fixture(scope="module")
def tree_demo(tmp_path_factory) -> subprocess.CompletedProcess:
    """`ahe demo DIR --search tree`: write_demo(DIR, search="tree"), then `ahe evolve` into DIR/run
    (built once a session, tests/shared_runs.py): what it printed."""
    d = shared_runs.tree_demo(tmp_path_factory)
    proc = subprocess.CompletedProcess(["ahe", "demo", str(d), "--search", "tree"], 0,
                                       (d.parent / "stdout.txt").read_text(), (d.parent / "stderr.txt").read_text())
    assert proc.stdout.strip() == str(d / "run")  # stdout: the run folder only
    return proc


@pytest.fixture(scope="module")
def tree_run(tree_demo) -> Path:
    return Path(tree_demo.stdout.strip())


def test_the_tree_is_kept_between_rounds_and_best_is_judged(tree_run):
    tree = load_tree(RunFolder(tree_run))
    ids = [n.id for n in tree.nodes]
    assert ids == [f"node-{i:03d}" for i in range(8)]
    first = tree.rounds[0]
    assert first.iteration == 1 and first.children == ["node-001", "node-002"]  # two branches expanded
    assert [r.iteration for r in tree.rounds] == [1, 2, 3]
    assert tree.node("node-001").pruned and "node-001" in tree.rounds[1].pruned  # Y regresses: pruned
    merge = tree.merges[0]
    assert merge.node == "node-003" and tree.node("node-003").kind == "merge" and "different files" in merge.reason
    assert "[" in tree.best_reason and "re-evaluated" in tree.best_reason
    repo = git.Repo(tree_run / "workspace")
    assert repo.commit("best").hexsha == tree.node(tree.best).commit
    assert {h.name for h in repo.heads} >= set(ids)
    for n in tree.nodes:
        assert repo.commit(n.branch).hexsha == n.commit
    # the line's manifest reads back, so attribution judged the tree's change
    att = json.loads((tree_run / "iterations" / "002" / "attribution.json").read_text())
    assert [(c["change_id"], c["verdict"]) for c in att["changes"]] == [("n002-chg-1", "keep")]


def test_the_real_loop_expands_two_branches_merges_rolls_back_and_returns_best_off_the_first_branch(tree_run):
    """Issue 36 item 8, from tree.json of the real run (`ahe evolve`, scripted evolve agent)."""
    tree = load_tree(RunFolder(tree_run))
    node = tree.node
    # (1) two branches from the seed, and the second branch is expanded again in rounds 2 and 3
    assert [n.id for n in tree.nodes if n.parent == "node-000" and n.kind == "child"] == ["node-001", "node-002"]
    assert [(r.expansions[i], c) for r in tree.rounds[1:] for i, c in enumerate(r.children) if c] == [
        ("node-002", "node-004"), ("node-002", "node-006")]
    # (2) a merge made (and one refused, with the files both sides change)
    made = [m for m in tree.merges if m.node]
    assert made and all(node(m.node).kind == "merge" and node(m.node).n_trials > 0 for m in made)
    assert any(m.node is None and "both sides change agent.yaml" in m.reason for m in tree.merges)
    # (3) round 2's child brings the middleware back; iteration 3's attribution rolls it back
    assert node("node-004").changes == ["n004-chg-1"] and tree.rounds[1].line == "node-004"
    back = [n for n in tree.nodes if n.kind == "rollback"]
    assert [(n.id, n.parent, n.iteration, n.rolled_back) for n in back] == [("node-005", "node-004", 3, ["n004-chg-1"])]
    att = json.loads((tree_run / "iterations" / "003" / "attribution.json").read_text())
    assert [(c["change_id"], c["verdict"]) for c in att["changes"]] == [("n004-chg-1", "rollback")]
    assert "n004-chg-1" not in tree.changes_on("node-005")
    # (4) best: round 3's backup lesson on the second branch, judged over its evaluations and the re-evaluation
    assert tree.best == "node-006" and tree.path("node-006") == ["node-000", "node-002", "node-006"]
    assert "node-001" not in tree.path(tree.best) and tree.best in tree.finalists
    best = node("node-006")
    assert best.n_trials == 18 and best.n_passed == 18 and any(e.startswith("tree-final/") for e in best.evaluations)
    low, high = best.interval()
    assert low > node("node-002").estimate()[0] and tree.best_reason.startswith(f"node-006: estimated pass@1 {best.estimate()[0]:.3f} [{low:.3f}")


def test_history_names_the_trees_best_and_commits_name_the_tree_ids(tree_run):
    tree = load_tree(RunFolder(tree_run))
    best = tree.node(tree.best)
    low, high = best.interval()
    lines = (tree_run / "history.md").read_text().splitlines()
    words = f"node-006 ({best.commit[:10]}) of the search tree, estimated pass@1 {best.estimate()[0]:.3f} [{low:.3f}, {high:.3f}]"
    assert lines[-1].startswith("- loop ended: finished all iterations; best: " + words)
    assert lines[-1].endswith("path node-000 → node-002 → node-006")
    assert any(line.startswith("  - search tree: best node-006: ") for line in lines)
    scores = json.loads((tree_run / "scores.json").read_text())
    assert scores["best_commit"] == best.commit and scores["best_iteration"] == 4  # the round that evaluated it
    # every change commit names the id its manifest (and tree.json) gives it
    repo = git.Repo(tree_run / "workspace")
    ids = {e.id: e.commit for n in tree.nodes for e in n.entries}
    named = {c.message.split(" ", 1)[0]: c.hexsha for c in repo.iter_commits("--all") if "-chg-" in c.message.split(" ", 1)[0]}
    assert named == ids and set(named) == {"n001-chg-1", "n002-chg-1", "n004-chg-1", "n006-chg-1"}
    manifest = json.loads((tree_run / "iterations" / "003" / "tree" / "c2" / "evolve" / "manifest.json").read_text())
    assert [c["id"] for c in manifest["changes"]] == ["n006-chg-1"]


def test_the_demo_summary_names_the_tree_facts(tree_run, tree_demo):
    from ahe.demo import tree_facts

    facts = "\n".join(tree_facts(tree_run))
    assert tree_demo.stderr.rstrip().endswith(facts)  # what `ahe demo --search tree` prints at the end
    assert "round 1: expanded node-000 → node-001, node-000 → node-002; the line went on from node-002" in facts
    assert "round 2: expanded node-002 → node-004; pruned node-001; the line went on from node-004" in facts
    assert "merge, round 1: node-003 — merged n001-chg-1 of node-001 into node-002" in facts
    assert "rollback, iteration 3: n004-chg-1 reverted on node-004 → node-005" in facts
    best = load_tree(RunFolder(tree_run)).node("node-006")
    low, high = best.interval()
    assert (f"best: node-006, estimated pass@1 {best.estimate()[0]:.3f} [{low:.3f}, {high:.3f}] over 18 trials; "
            "path node-000 → node-002 → node-006") in facts


def test_ahe_demo_search_names_the_choices(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "demo", str(tmp_path / "d"), "--search", "beam"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "--search: the demo runs search line or tree, not 'beam'" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "d").exists()


def test_a_merge_whose_sides_change_the_same_file_is_not_made_and_says_why():
    import asyncio

    from ahe.evolution.tree.merge import try_merge

    seed = Node(id="node-000", commit="0" * 40, kind="seed", n_trials=6, n_passed=2)
    a = Node(id="node-001", commit="1" * 40, parent="node-000", changes=["n001-chg-1"], entries=[_entry("n001-chg-1")],
             n_trials=6, n_passed=4)
    b = Node(id="node-002", commit="2" * 40, parent="node-000", changes=["n002-chg-1"], entries=[_entry("n002-chg-1")],
             n_trials=6, n_passed=3)
    tree = Tree(nodes=[seed, a, b])
    made = asyncio.run(try_merge(None, tree, 2))  # refused before any repository or rollout is touched
    assert made is not None and made.node is None
    rec = tree.merges[0]
    assert rec.node is None and rec.parts == ["node-001", "node-002"]
    assert rec.reason == "not merged: both sides change LongTermMEMORY.md (n001-chg-1 vs n002-chg-1)"
    assert asyncio.run(try_merge(None, tree, 3)) is None  # a pair is tried once


def test_the_audit_shows_the_tree_with_estimates_merges_and_the_path_to_best(tree_run):
    audit = json.loads(subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(tree_run), "--format", "json"],
                                      capture_output=True, text=True, timeout=120, check=True).stdout)
    tree = audit["tree"]
    nodes = {n["id"]: n for n in tree["nodes"]}
    assert list(nodes) == [f"node-{i:03d}" for i in range(8)]
    assert tree["best"] == "node-006" and tree["path_to_best"] == ["node-000", "node-002", "node-006"]
    assert nodes["node-006"]["status"].startswith("best") and "pruned" in nodes["node-001"]["status"]
    assert nodes["node-002"]["status"].startswith("on the path to best, finalist")
    assert nodes["node-006"]["changes"] == ["n006-chg-1"] and nodes["node-003"]["kind"] == "merge"
    assert nodes["node-005"]["kind"] == "rollback" and nodes["node-005"]["rolled_back"] == ["n004-chg-1"]
    low, high = nodes["node-006"]["interval"]
    assert low < nodes["node-006"]["estimate"] <= high and nodes["node-006"]["trials"] >= 6
    table = subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(tree_run)],
                           capture_output=True, text=True, timeout=120, check=True).stdout
    assert "Search tree" in table and "path to best: node-000 → node-002 → node-006" in table
    merge = next(l for l in table.splitlines() if l.lstrip("│┃ ").startswith("node-003"))
    assert "merge of" in merge and "node-001" in merge and "node-002" in merge and "made node-003" in table
    line = next(l for l in table.splitlines() if l.lstrip("│┃ ").startswith("node-006"))
    assert "n006-chg-1" in line and "best" in line


def test_ahe_diff_and_transfer_take_any_node_by_its_branch(tree_run, tmp_path):
    from ahe.report.transfer import resolve_harness

    tree = load_tree(type("_Run", (), {"root": tree_run})())
    out = subprocess.run([sys.executable, "-m", "ahe.cli", "diff", str(tree_run), "node-000", "node-003", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    diff = json.loads(out.stdout)
    text = json.dumps(diff)
    assert tree.node("node-000").commit[:10] in text and tree.node("node-003").commit[:10] in text
    assert "LongTermMEMORY.md" in text and "agent.yaml" in text  # the merge holds both branches' files
    picked = resolve_harness(f"{tree_run}@node-001", tmp_path, "harness")
    assert picked["commit"] == tree.node("node-001").commit
    assert "strict_mode" in (Path(picked["path"]) / "agent.yaml").read_text()  # node-001's own change
    with pytest.raises(Exception, match="node-009"):
        resolve_harness(f"{tree_run}@node-009", tmp_path, "harness")


def test_the_plan_counts_the_trees_evolve_calls_children_merges_and_finalists(tree_run):
    """`ahe plan --from` the tree demo, for the same config: the night's trials (rollouts, children,
    merges, finalists) and each role's tokens inside the forecast's interval, evolve per call."""
    plan = subprocess.run([sys.executable, "-m", "ahe.cli", "plan", str(tree_run.parent / "config.yaml"), "--from",
                           str(tree_run), "--json"], capture_output=True, text=True, timeout=120, check=True)
    fc = json.loads(plan.stdout)
    ran = [p for p in tree_run.glob("**/trial-*/result.json") if "workspace" not in p.parts]
    total = fc["trials"]["total"]
    assert total["low"] <= len(ran) <= total["high"] and total["mid"] == len(ran) == 72
    spent = json.loads((tree_run / "scores.json").read_text())["totals"]["tokens"]
    for role in fc["roles"]:
        iv, actual = role["total_tokens"], spent[role["role"]]
        assert iv["low"] <= actual <= iv["high"] and abs(iv["mid"] - actual) <= 0.25 * actual, (role["role"], iv, actual)
    assert any("search tree: 2 evolve sessions per iteration" in a for a in fc["assumptions"])
