"""A round whose every trial is an infrastructure error is not judged: the run stops with one
sentence, the trials are kept aside, and `--resume` runs the round again (the real loop)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from ahe.demo import write_demo
from tests.conftest import REPO

pytestmark = pytest.mark.bwrap


def _evolve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ahe.cli", "evolve", *args, "--quiet"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)


def test_a_round_of_only_infra_errors_stops_and_resumes(tmp_path):
    config = write_demo(tmp_path / "demo", iterations=2)
    cfg = yaml.safe_load(config.read_text())
    good_agent = cfg["mock_policies"].pop("agent")
    cfg["include"] = cfg["include"][:2]
    # the agent's endpoint refuses every connection: each trial is an infrastructure error
    cfg["models"]["agent"].update(base_url="http://127.0.0.1:9/v1", max_attempts=1, backoff_initial_sec=0.01)
    config.write_text(yaml.safe_dump(cfg))
    run = tmp_path / "run"
    out = _evolve(str(config), "--run-dir", str(run))
    said = out.stdout + out.stderr
    assert out.returncode != 0 and "Traceback" not in said, said[-2000:]
    assert "iteration 1: all 4 trials ended in an infrastructure error" in said and "--resume" in said, said[-2000:]
    assert "(first: " in said and "127.0.0.1:9" in said and "no message" not in said, said[-2000:]  # the first trial's error
    it1 = run / "iterations" / "001"
    assert not (it1 / "rollouts").exists() and len(list(it1.glob("rollouts.infra-*/*/*/result.json"))) == 4
    scores = json.loads((run / "scores.json").read_text()) if (run / "scores.json").exists() else {}
    assert not scores.get("iterations"), scores  # nothing recorded as a score of the harness
    assert not (run / "iterations" / "002").exists()  # no evolve, no judgement

    # the endpoint is fixed: resuming runs iteration 1's rollout again and the run goes on
    saved = yaml.safe_load((run / "experiment.yaml").read_text())
    saved["models"]["agent"].pop("base_url")
    saved["mock_policies"]["agent"] = str((config.parent / good_agent).resolve())
    (run / "experiment.yaml").write_text(yaml.safe_dump(saved))
    again = _evolve("--resume", str(run))
    assert again.returncode == 0, (again.stdout + again.stderr)[-2000:]
    results = json.loads((it1 / "results.json").read_text())
    assert results["n_trials"] == 4 and results["infra_errors"] == 0
    assert (run / "iterations" / "002" / "results.json").exists()
