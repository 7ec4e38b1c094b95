"""`ahe evolve` with `metric: evoscore` on the bundled SWE-CI examples, end to end (mock models
for every role over real HTTP, real bwrap, real git): two iterations, attributed on EvoScore."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "swe-ci"

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def test_evolve_attributes_on_evoscore(tmp_path):
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "evolve", str(EXAMPLES / "evolve.yaml"), "--run-dir", str(run), "-q"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    att = json.loads((run / "iterations" / "002" / "attribution.json").read_text())
    assert att["metric"] == "evoscore" and att["delta"] == 0.05
    # EvoScore (γ = 2) per task before and after the lesson: textstats 0.905 -> 1, units 0.629 -> 0.686
    assert att["pass_rate_before"]["textstats"] == pytest.approx((2 / 3 + 12) / 14)
    assert att["pass_rate_after"]["units"] == pytest.approx(9.6 / 14)
    assert att["improved"] == ["textstats", "units"] and att["regressed"] == []
    [change] = att["changes"]
    assert change["verdict"] == "keep" and change["fixes_improved"] == ["textstats", "units"]

    scores = json.loads((run / "scores.json").read_text())
    assert scores["metric"] == "evoscore" and scores["best_iteration"] == 2
    assert scores["best_metric_value"] == pytest.approx((1 + 1 + 9.6 / 14) / 3)
    it1, it2 = scores["iterations"][0], scores["iterations"][1]
    assert it1["pass_at_1"] == it2["pass_at_1"] == pytest.approx(2 / 3)  # the pass rate did not move
    assert it1["reward_means"]["zero_regression"] == pytest.approx(1 / 3)
    assert it2["reward_means"]["zero_regression"] == 1.0

    # the same evidence judged by the pass rate: nothing flips, the change is not kept on it
    from ahe.evolution.attribution import attribute
    from ahe.harness.manifest import Manifest
    from ahe.rollout.models import RunResults

    manifest = Manifest.model_validate_json((run / "iterations" / "001" / "evolve" / "manifest.json").read_text())
    before, after = (RunResults.model_validate_json((run / "iterations" / f"00{i}" / "results.json").read_text()) for i in (1, 2))
    by_pass = attribute(manifest.accepted(), before, after, iteration=2, delta=0.05)
    assert by_pass.improved == [] and by_pass.changes[0].verdict == "inconclusive"

    audit = subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(run)], capture_output=True, text=True, timeout=60)
    assert audit.returncode == 0, audit.stderr
    flat = " ".join(audit.stdout.split())
    assert "EvoScore (γ=1) 0.770" in flat and "EvoScore (γ=2) 0.844" in flat and "zero-regression rate 0.333" in flat

    report = subprocess.run([sys.executable, "-m", "ahe.cli", "report", str(run), "--out", str(tmp_path / "r.html")],
                            capture_output=True, text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "r.html").read_text()
    assert 'id="swe-ci-table"' in html and "<th>EvoScore (γ=2)</th>" in html
    assert "best: iteration 2 (mean evoscore 0.895)" in html

    # the debugger's corpus sees every round's sessions as sub-agent traces of the trial
    index = (run / "iterations" / "001" / "corpus" / "units" / "trial-1" / "index.md").read_text()
    for r in (1, 2, 3):
        for role in ("architect", "programmer"):
            assert f"corpus/units/trial-1/sub_agents/r{r:02d}-{role}/index.md" in index
    assert "round 2: a = 0.4000, 4 target tests pass, 1 regression(s): tests.test_units.TestUnits.test_to_feet" in index
