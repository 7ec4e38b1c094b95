"""The mini-swe-agent backend under `ahe eval --executor ray`: the trial runs on a Ray node, its
worker jailed there with mini's loop, its gateway in the node's runner; the same result as local."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mini_support import mini_harness, needs_mini
from tests.ray_support import ray_cluster  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [needs_mini, pytest.mark.xdist_group("ray"), pytest.mark.timeout(600)]


def test_mini_trial_on_a_ray_node(ray_cluster, tmp_path: Path) -> None:  # noqa: F811
    harness = mini_harness(tmp_path / "h")
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_ADDRESS="")
    p = subprocess.run([sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(harness), "--tasks",
                        str(ROOT / "examples" / "tasks"), "--task", "word-frequency-top", "--mock-policy",
                        str(ROOT / "examples" / "policies" / "mini-write-file.yaml"), "--out", str(tmp_path / "out"),
                        "--executor", "ray", "--ray-address", ray_cluster.address, "--json"],
                       capture_output=True, text=True, timeout=500, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    trial = tmp_path / "out" / "rollouts" / "word-frequency-top" / "trial-1"
    result = json.loads((trial / "result.json").read_text())
    assert (result["stop_reason"], result["turns"], result["error_class"]) == ("stop_tool", 2, None)
    traj = json.loads((trial / "trajectory.json").read_text())
    assert traj["agent"]["name"] == "mini-swe-agent" and "hello.txt" in json.dumps(traj["steps"][2]["observation"])
    assert (trial / "events.jsonl").is_file() and (trial / "conversation.jsonl").is_file()
