"""`ahe demo --backend mini-swe-agent`: the demo's loop offline on a mini-swe-agent harness (mini's own
mini.yaml, bundled in examples/mini-swe-agent) — one change kept, one rolled back — and a run
folder with the same files as the `ahe` demo's, which `ahe audit` and `ahe report` read alike.
A real `ahe` subprocess, the mock over HTTP, real bwrap and git."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from ahe.demo import MINI_STRICT, X, Y
from tests.mini_support import needs_mini
from tests.shared_runs import line_demo, mini_demo

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [needs_mini, pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
              pytest.mark.xdist_group("mini-demo")]


def _ahe(*args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "ahe.cli", *args], capture_output=True, text=True, timeout=timeout, env=env)


def _layout(run: Path) -> set[str]:
    """The run folder's files, minus what differs by nature: the harness's own files, the sandbox's
    numbered exec logs, the corpus's shared prompts (long ones only) and replay (ahe only)."""
    out = set()
    for p in run.rglob("*"):
        rel = p.relative_to(run)
        if not p.is_file() or rel.parts[0] == "workspace" or "root" in rel.parts or "_shared" in rel.parts \
                or "replay" in rel.parts:
            continue
        out.add(re.sub(r"\d{4}", "N", str(rel)))
    return out


@pytest.fixture(scope="module")
def mini_run(tmp_path_factory) -> Path:
    """`ahe demo DIR --backend mini-swe-agent --quiet`, built once a session (tests/shared_runs.py); read only."""
    return mini_demo(tmp_path_factory)


def test_mini_demo_keeps_one_change_and_rolls_back_the_other(mini_run: Path) -> None:
    scores = json.loads((mini_run / "scores.json").read_text())
    assert [s["pass_at_1"] for s in scores["iterations"]] == pytest.approx([1 / 3, 1 / 3, 2 / 3, 2 / 3])
    att = json.loads((mini_run / "iterations" / "002" / "attribution.json").read_text())
    v = {c["change_id"]: c for c in att["changes"]}
    assert v["chg-1"]["verdict"] == "keep" and v["chg-1"]["fixes_improved"] == [X]
    assert v["chg-2"]["verdict"] == "rollback" and att["regressed"] == [Y]
    manifest = json.loads((mini_run / "iterations" / "001" / "evolve" / "manifest.json").read_text())
    assert [(c["id"], c["status"], c["component"], c["files"]) for c in manifest["changes"]] == [
        ("chg-1", "accepted", "system_prompt", ["mini.yaml"]), ("chg-2", "accepted", "system_prompt", ["mini.yaml"])]
    mini_yaml = (mini_run / "workspace" / "mini.yaml").read_text()
    assert "byte for byte" in mini_yaml and MINI_STRICT not in mini_yaml  # reverted by git revert, the lesson stays
    repo = git.Repo(mini_run / "workspace")
    assert "rollback chg-2" in repo.commit("iter-002").message
    trial = mini_run / "iterations" / "001" / "rollouts" / Y / "trial-1"
    traj = json.loads((trial / "trajectory.json").read_text())
    assert traj["agent"]["name"] == "mini-swe-agent" and traj["extra"]["stop_reason"] == "stop_tool"
    assert json.loads((trial / "trajectory.claimed.json").read_text())["extra"]["exit_status"] == "Submitted"


def test_mini_demo_run_folder_matches_the_ahe_demo_and_audit_report_read_it(mini_run: Path, tmp_path: Path,
                                                                            tmp_path_factory) -> None:
    ahe_layout, mini_layout = _layout(line_demo(tmp_path_factory)), _layout(mini_run)  # the `ahe` demo: `ahe demo --quiet`'s run
    assert ahe_layout == mini_layout, (sorted(ahe_layout - mini_layout)[:10], sorted(mini_layout - ahe_layout)[:10])
    audit = _ahe("audit", str(mini_run))
    assert audit.returncode == 0 and "chg-2" in audit.stdout, audit.stderr
    report = _ahe("report", str(mini_run), "--out", str(tmp_path / "report.html"))
    assert report.returncode == 0 and (tmp_path / "report.html").stat().st_size > 0, report.stderr
