"""`ahe report` draws the search tree of a `search: tree` run (issue 36 item 7): the layout on its
own, then a real tree run (the demo, `ahe evolve`) rendered and loaded in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ahe.report.html import report_command
from ahe.report.html_tree import BOX_H, BOX_W, tree_svg
from tests import shared_runs
from tests.shared_runs import copy_run
from tests.chromium_support import ARTIFACTS, assert_inert, load_in_chromium, needs_chromium

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _node(nid: str, parent: str | None, kind: str = "child", merged_from=(), changes=(), **kw) -> dict:
    return {"id": nid, "parent": parent, "kind": kind, "iteration": kw.get("iteration", 1), "changes": list(changes),
            "merged_from": list(merged_from), "rolled_back": kw.get("rolled_back", []), "trials": 4, "passed": 2,
            "estimate": 0.5, "sd": 0.2, "interval": [0.1, 0.9], "pruned": kw.get("pruned", False),
            "exhausted": False, "status": "-"}


def _boxes(svg: str) -> dict[str, tuple[float, float]]:
    return {m[0]: (float(m[1]), float(m[2])) for m in
            re.findall(r'data-node="([^"]+)"><title>.*?</title><rect class="box" x="([\d.]+)" y="([\d.]+)"', svg)}


def test_layout_by_depth_without_overlaps_and_merges_right_of_both_parts() -> None:
    nodes = [_node("s", None, "seed", iteration=0), _node("a", "s", changes=["c1"]), _node("b", "s", changes=["c2"]),
             _node("a1", "a", changes=["c3"]), _node("a2", "a", changes=["c4", "c5", "c6", "c7"]),
             _node("b1", "b", changes=["a-very-long-change-id-from-the-agent"]),
             _node("m", "b", "merge", merged_from=["a1"], changes=["c3"], iteration=2),
             _node("r", "a2", "rollback", rolled_back=["c5"], iteration=3)]
    summary = {"nodes": nodes, "best": "m", "finalists": ["m", "a1"], "path_to_best": ["s", "b", "m"]}
    svg = str(tree_svg(summary))
    boxes = _boxes(svg)
    assert set(boxes) == {n["id"] for n in nodes}
    col = {nid: x for nid, (x, _) in boxes.items()}
    assert col["s"] < col["a"] == col["b"] < col["a1"] == col["a2"] == col["b1"] < col["m"] == col["r"]
    for p in boxes:  # no two boxes overlap
        for q in boxes:
            if p < q:
                (x1, y1), (x2, y2) = boxes[p], boxes[q]
                assert abs(x1 - x2) >= BOX_W or abs(y1 - y2) >= BOX_H, (p, q)
    # a merge has one edge from each part; only the path to best is bold
    edges = re.findall(r'<g class="(tree-edge[^"]*)" data-from="([^"]+)" data-to="([^"]+)"', svg)
    assert sorted((f, c) for c, f, t in edges if t == "m") == [("a1", "tree-edge merge-edge"), ("b", "tree-edge merge-edge on-path")]
    assert sorted((f, t) for c, f, t in edges if "on-path" in c) == [("b", "m"), ("s", "b")]
    # labels: one line per change id, at most three lines, a long id cut (the tooltip has it whole)
    labels = re.findall(r'<text class="edge-label"[^>]*>([^<]*)<title>([^<]*)</title>', svg)
    assert [t for t, _ in labels if "c4" in _] == ["c4", "c5", "+2 more"]
    assert ("a-very-long-change-…", "b1 adds: a-very-long-change-id-from-the-agent") in labels
    assert ("rolled back c5", "r adds: rolled back c5") in labels
    assert re.search(r'class="tree-node kind-merge best on-path finalist" data-node="m"', svg)


def test_a_parent_cycle_or_an_unknown_parent_still_draws() -> None:
    nodes = [_node("x", "y"), _node("y", "x"), _node("z", "nowhere")]
    svg = str(tree_svg({"nodes": nodes, "best": None, "finalists": [], "path_to_best": []}))
    assert set(_boxes(svg)) == {"x", "y", "z"}
    assert "pending" in str(tree_svg({"nodes": [], "best": None, "finalists": [], "path_to_best": []}))


@pytest.fixture(scope="module")
def tree_run(tmp_path_factory) -> Path:
    """The tree demo through `ahe evolve` (built once a session, tests/shared_runs.py): node-001 pruned,
    merges node-003 and node-007, the rollback node-005, best node-006 on node-000 → node-002 → node-006."""
    return shared_runs.tree_demo(tmp_path_factory) / "run"


@needs_bwrap
@needs_chromium
def test_the_tree_drawn_in_the_report(tree_run: Path, tmp_path: Path) -> None:
    tree = json.loads((tree_run / "tree.json").read_text())
    out = report_command(tree_run, tmp_path / "report.html", False)
    shot = ARTIFACTS / "report-tree.png"
    r = load_in_chromium(out, tmp_path, screenshot=shot, clip="#sec-tree")
    assert r["console_errors"] == [] and r["exceptions"] == [], r
    assert all(u == out.resolve().as_uri() for u in r["requests"]), r["requests"]
    dom = r["dom"]
    assert dom["treeSection"] and dom["treeLegend"] and dom["scripts"] == 0
    classes = dict(dom["treeNodes"])
    assert list(classes) == [n["id"] for n in tree["nodes"]] == [f"node-00{i}" for i in range(8)]
    assert [n for n, c in classes.items() if "best" in c.split()] == [tree["best"]] == ["node-006"]
    assert "pruned" in classes["node-001"].split() and "finalist" in classes["node-002"].split()
    assert all("exhausted" in classes[n["id"]].split() for n in tree["nodes"] if n["exhausted"])
    edges = {(f, t): c.split() for f, t, c in dom["treeEdges"]}
    assert sorted(e for e, c in edges.items() if "on-path" in c) == [("node-000", "node-002"), ("node-002", "node-006")]
    assert {f for (f, t), c in edges.items() if t == "node-003" and "merge-edge" in c} == {"node-002", "node-001"}
    assert {f for (f, t), c in edges.items() if t == "node-007" and "merge-edge" in c} == {"node-006", "node-003"}
    assert dom["treeLabels"] == ["n001-chg-1", "n002-chg-1", "n001-chg-1", "n004-chg-1", "rolled back n004-ch…",
                                 "n006-chg-1", "n001-chg-1"]  # node-001 … node-007 (a merge's: what its other part adds)
    assert dom["treeBest"] == f"Best: node-006 — {tree['best_reason']}"
    assert [m.split("\t")[:3] for m in dom["treeMerges"][1:]] == [["1", "node-002 + node-001", "made node-003"],
                                                                  ["2", "node-003 + node-004", "not made"],
                                                                  ["3", "node-006 + node-003", "made node-007"]]
    assert 700 < dom["treeBox"][0] <= 1300 and dom["treeBox"][1] > 150  # scaled to the page, still readable
    assert shot.exists() and shot.stat().st_size > 10_000


@needs_bwrap
@needs_chromium
def test_hostile_text_and_a_refused_merge_in_the_tree(tree_run: Path, tmp_path: Path) -> None:
    run = copy_run(tree_run, tmp_path / "run")
    tree = json.loads((run / "tree.json").read_text())
    evil = '<script>alert(1)</script><img src="http://198.51.100.7/x.png">'
    tree["nodes"][1]["changes"] = [evil]
    tree["merges"].append({"iteration": 2, "parts": ["node-000", "node-002"], "node": None,
                           "reason": f"both touch LongTermMEMORY.md {evil}"})
    (run / "tree.json").write_text(json.dumps(tree))
    out = report_command(run, tmp_path / "report.html", False)
    html = out.read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html
    r = load_in_chromium(out, tmp_path)
    assert_inert(r, out)
    dom = r["dom"]
    assert dom["treeLabels"][0] == evil[:19] + "…"
    assert dom["treeMerges"][-1].split("\t") == ["2", "node-000 + node-002", "not made", f"both touch LongTermMEMORY.md {evil}"]


@needs_bwrap
def test_a_half_written_tree_json_is_pending(tree_run: Path, tmp_path: Path) -> None:
    run = copy_run(tree_run, tmp_path / "run", ignore=shutil.ignore_patterns("workspace", "corpus", "rollouts"))
    (run / "tree.json").write_text('{"nodes": [')
    html = report_command(run, tmp_path / "report.html", False).read_text()
    assert 'id="sec-tree"' in html and "pending: tree.json has no node yet" in html and "no best chosen yet" in html


def test_a_line_run_has_no_tree_section(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "iterations" / "001").mkdir(parents=True)
    (run / "loop_state.json").write_text(json.dumps({"done": {}, "finished": False}))
    html = report_command(run, None, False).read_text()
    assert 'id="sec-tree"' not in html and 'href="#sec-tree"' not in html
