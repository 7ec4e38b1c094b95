"""`search: tree` under `executor: ray` on a real local cluster: a round's children are evaluated side
by side on the run's shared executor — their trials overlap in time (result.json start and end)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.ray_support import ray_cluster, ray_demo  # noqa: F401  (fixture)
from tests.test_tree_budget_loop import _Run, overlap

pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.timeout(600)]


def test_a_rounds_children_run_side_by_side_on_a_ray_cluster(ray_cluster, tmp_path):  # noqa: F811
    from ahe.evolution.tree.archive import load_tree

    config = ray_demo(tmp_path / "exp", ray_cluster.address, search="tree")
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "evolve", str(config), "--run-dir", str(run), "-q"],
                          capture_output=True, text=True, timeout=500, env={**os.environ, "RAY_ADDRESS": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    tree = load_tree(_Run(run))
    assert tree.rounds[0].children == ["node-001", "node-002"] and tree.best is not None
    c1, c2 = (run / "iterations" / "001" / "tree" / c for c in ("c1", "c2"))
    assert overlap(c1, c2), "the two children's trials did not overlap in time"
    for child in (c1, c2):  # every trial of both children finished
        results = [json.loads(p.read_text()) for p in child.glob("rollouts/*/trial-*/result.json")]
        assert len(results) == 6 and all(r.get("error_class") != "infra" for r in results)
