"""`search: tree` in the real loop (`ahe evolve`, issue 36): the demo tasks, the scripted evolve
agent and mock models over real HTTP. The archive (tree.json) must survive between rounds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from ahe.demo import write_demo
from ahe.evolution.tree.archive import Node, Tree, load_tree
from ahe.harness.manifest import ChangeEntry, Manifest

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


@pytest.fixture(scope="module")
def tree_run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tree")
    cfg = write_demo(d, search="tree")
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "evolve", str(cfg), "--run-dir", str(d / "run"), "-q"],
                          capture_output=True, text=True, timeout=400, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    return d / "run"


def test_the_tree_is_kept_between_rounds_and_best_is_judged(tree_run):
    class _Run:
        root = tree_run
    tree = load_tree(_Run())
    ids = [n.id for n in tree.nodes]
    assert ids == ["node-000", "node-001", "node-002", "node-003"]
    first = tree.rounds[0]
    assert first.iteration == 1 and first.children == ["node-001", "node-002"]  # two branches expanded
    assert [r.iteration for r in tree.rounds] == [1, 2, 3]
    assert tree.node("node-001").pruned and "node-001" in tree.rounds[1].pruned  # Y regresses: pruned
    merge = tree.merges[0]
    assert merge.node == "node-003" and tree.node("node-003").kind == "merge" and "different files" in merge.reason
    assert tree.best == "node-002" and tree.best != first.children[0]  # not the first branch
    assert "[" in tree.best_reason and "re-evaluated" in tree.best_reason
    repo = git.Repo(tree_run / "workspace")
    assert repo.commit("best").hexsha == tree.node("node-002").commit
    assert {h.name for h in repo.heads} >= set(ids)
    for n in tree.nodes:
        assert repo.commit(n.branch).hexsha == n.commit
    # the line's manifest reads back, so attribution judged the tree's change
    att = json.loads((tree_run / "iterations" / "002" / "attribution.json").read_text())
    assert [(c["change_id"], c["verdict"]) for c in att["changes"]] == [("n002-chg-1", "keep")]


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
    assert list(nodes) == ["node-000", "node-001", "node-002", "node-003"]
    assert tree["best"] == "node-002" and tree["path_to_best"] == ["node-000", "node-002"]
    assert nodes["node-002"]["status"].startswith("best") and "pruned" in nodes["node-001"]["status"]
    assert nodes["node-000"]["status"].startswith("on the path to best, finalist")
    assert nodes["node-002"]["changes"] == ["n002-chg-1"] and nodes["node-003"]["kind"] == "merge"
    low, high = nodes["node-002"]["interval"]
    assert low < nodes["node-002"]["estimate"] < high and nodes["node-002"]["trials"] >= 6
    table = subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(tree_run)],
                           capture_output=True, text=True, timeout=120, check=True).stdout
    assert "Search tree" in table and "path to best: node-000 → node-002" in table
    merge = next(l for l in table.splitlines() if l.lstrip("│┃ ").startswith("node-003"))
    assert "merge of" in merge and "node-001" in merge and "node-002" in merge and "made node-003" in table
    line = next(l for l in table.splitlines() if l.lstrip("│┃ ").startswith("node-002"))
    assert "n002-chg-1" in line and "best" in line


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
