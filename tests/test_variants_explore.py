"""`ahe evolve` with `variants: 2` and `explore` end to end on the demo's MOCK models, killed in the
middle of the variants and resumed.

Variant 1 of the evolve agent records the demo's two changes (lesson + StrictMode middleware:
pass@1 1/3), variant 2 only the lesson (2/3), so best-of-2 picks variant 2. The explore agent
reads a local playbook and records one skill before the evolve phase of iteration 1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from ahe.demo import X, write_demo

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _evolve(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ahe.cli", "evolve", *args, "-q"], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env={**os.environ, **(env or {})})


def test_variants_and_explore_survive_a_kill_during_the_variants(tmp_path):
    playbook = tmp_path / "playbook"
    playbook.mkdir()
    (playbook / "verify.md").write_text("# Verify\nCompare the output with the specification before finishing.\n")
    cfg = write_demo(tmp_path / "exp", iterations=1, variants=2, explore_sources=[str(playbook)])
    run = tmp_path / "run"

    killed = _evolve(str(cfg), "--run-dir", str(run), env={"AHE_KILL_AT": "001/variant-1-evaluated"})
    assert killed.returncode == -9, killed.stderr
    v1 = run / "iterations/001/variants/v1"
    finished = {p: p.stat().st_mtime_ns for p in v1.glob("rollouts/*/*/result.json")}
    assert len(finished) == 3 * 2  # variant 1 was evaluated in full before the kill
    v1_trajectory = (v1 / "evolve/trajectory.json").stat().st_mtime_ns

    resumed = _evolve("--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert {p: p.stat().st_mtime_ns for p in v1.glob("rollouts/*/*/result.json")} == finished  # nothing re-run
    assert (v1 / "evolve/trajectory.json").stat().st_mtime_ns == v1_trajectory  # variant 1 not evolved again

    report = json.loads((run / "iterations/001/variants/variants.json").read_text())
    assert report["chosen"] == 2 and report["rule"] == "pass_at_1"
    by = {v["n"]: v for v in report["variants"]}
    assert by[1]["pass_at_1"] == pytest.approx(1 / 3) and by[2]["pass_at_1"] == pytest.approx(2 / 3)
    repo = git.Repo(run / "workspace")
    assert repo.commit("iter-001").hexsha == by[2]["head_commit"]
    assert {b.name for b in repo.branches} >= {"variant/iter-001/v1", "variant/iter-001/v2"}
    assert repo.commit("variant/iter-001/v1").hexsha == by[1]["head_commit"]  # the other variant stays a branch

    manifest = json.loads((run / "iterations/001/evolve/manifest.json").read_text())
    changes = {c["id"]: c for c in manifest["changes"]}
    assert changes["chg-1"]["origin"] == "explore" and changes["chg-1"]["component"] == "skill"
    assert changes["chg-2"]["origin"] == "evolve" and changes["chg-2"]["component"] == "long_term_memory"
    assert "chg-3" not in changes  # variant 1's middleware is only on its branch
    assert (run / "workspace/skills/verify-output/SKILL.md").is_file()
    assert "middleware: []" in (run / "workspace/agent.yaml").read_text()

    # the final evaluation (iteration 2) judges the chosen variant's changes on a fresh rollout
    att = json.loads((run / "iterations/002/attribution.json").read_text())
    verdicts = {c["change_id"]: c["verdict"] for c in att["changes"]}
    assert verdicts["chg-2"] == "keep" and X in att["improved"] and "chg-1" in verdicts
    scores = json.loads((run / "scores.json").read_text())
    it1 = scores["iterations"][0]
    # budgets count every variant: iteration 1's agent tokens = its own rollout + both variants' evaluations
    own = json.loads((run / "iterations/001/results.json").read_text())["usage"]
    both = sum(json.loads((run / f"iterations/001/variants/v{n}/results.json").read_text())["usage"]["prompt_tokens"]
               + json.loads((run / f"iterations/001/variants/v{n}/results.json").read_text())["usage"]["completion_tokens"]
               for n in (1, 2))
    assert it1["tokens"]["agent"] == own["prompt_tokens"] + own["completion_tokens"] + both
    assert it1["tokens"]["explore"] > 0 and it1["tokens"]["evolve"] > 0

    audit = subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(run), "--json"], capture_output=True, text=True,
                           timeout=120, cwd=REPO)
    a = json.loads(audit.stdout)
    assert a["iterations"][0]["variants"]["chosen"] == 2
    assert [c["origin"] for c in a["iterations"][0]["changes"]] == ["explore", "evolve"]
