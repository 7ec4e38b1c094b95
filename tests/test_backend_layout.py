"""Every agent backend leaves the same run folder and the same audit and report (issue #24).

One `ahe evolve` per backend on the same bundled tasks with scripted MOCK models — AHE's own
runtime (`ahe demo`'s scenario), the `command` backend (tests/command_support.py) and, when its
extra is installed, mini-swe-agent (`ahe demo --backend mini-swe-agent`'s scenario) — and their
run folders compared file by file. What a backend may add is listed here with its reason;
anything else that differs is a layout difference the debugger, audit or report would trip on.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.command_support import command_run
from tests.shared_runs import line_demo, mini_demo

pytestmark = [pytest.mark.bwrap, pytest.mark.xdist_group("backend-layout")]
ROOT = Path(__file__).resolve().parents[1]

# Files a backend adds inside a trial (or gate) folder beyond the shared ones, and why.
BACKEND_EXTRAS = {
    "ahe": {"trajectory.claimed.json": "the worker's own trajectory, kept beside the gateway's as a claim",
            "replay": "replay foresight's reports (evolve/replay/<id>.json): only a replayable backend has them"},
    "command": {"agent-output.txt": "the CLI's own terminal output"},
    "mini-swe-agent": {"trajectory.claimed.json": "mini-swe-agent's own trajectory, kept beside the gateway's",
                       "mini.traj.json": "mini-swe-agent's trajectory in its own format",
                       "agent-output.txt": "the agent's own terminal output"},
}
SHARED_TRIAL_FILES = {"result.json", "conversation.jsonl", "trajectory.json", "verifier/reward.txt"}


def _layout(run: Path, backend: str) -> set[str]:
    extras = BACKEND_EXTRAS[backend]
    out = set()
    for p in run.rglob("*"):
        if not p.is_file():
            continue
        rel = str(p.relative_to(run))
        if rel.startswith("workspace/") or "/root/logs/" in rel:  # the harness itself; one file per command run
            continue
        if "/corpus/_shared/" in rel:  # the system prompts the sessions sent: a CLI agent may send none
            continue
        if p.name in extras or any(part in extras for part in Path(rel).parts[:-1]):
            continue
        out.add(rel)
    return out


def _mini_run(tmp_path_factory) -> Path | None:
    try:
        import minisweagent  # noqa: F401
    except ImportError:
        return None
    return mini_demo(tmp_path_factory)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    found = {"ahe": line_demo(tmp_path_factory), "command": command_run(tmp_path_factory)}  # built once a session
    mini = _mini_run(tmp_path_factory)
    if mini is not None:
        found["mini-swe-agent"] = mini
    return found


def test_every_backend_leaves_the_same_run_folder(runs: dict[str, Path]) -> None:
    reference = _layout(runs["ahe"], "ahe")
    for backend, run in runs.items():
        layout = _layout(run, backend)
        assert layout == reference, (f"{backend}: only there {sorted(layout - reference)[:10]}; "
                                     f"missing {sorted(reference - layout)[:10]}")
    trials = [p.parent for p in runs["ahe"].glob("iterations/*/rollouts/*/trial-*/result.json")]
    assert trials
    for run in runs.values():
        for trial in run.glob("iterations/*/rollouts/*/trial-*"):
            assert all((trial / f).is_file() for f in SHARED_TRIAL_FILES), trial


def _shape(value):
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__ if value is not None else None


def test_audit_and_report_are_the_same_for_every_backend(runs: dict[str, Path]) -> None:
    shapes, reports = {}, {}
    for backend, run in runs.items():
        audit = subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(run), "--json"], capture_output=True,
                               text=True, timeout=120, cwd=ROOT)
        assert audit.returncode == 0, audit.stderr
        data = json.loads(audit.stdout)
        assert data["finished"] and len(data["iterations"]) == len(json.loads(
            json.dumps(json.loads(audit.stdout)["iterations"])))
        shapes[backend] = set(data), {k for it in data["iterations"] for k in it}
        report = subprocess.run([sys.executable, "-m", "ahe.cli", "report", str(run), "--out", str(run / "r.html")],
                                capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert report.returncode == 0, report.stderr
        html = (run / "r.html").read_text()
        reports[backend] = re.findall(r"<h2[^>]*>(.*?)</h2>", html)
    assert all(s == shapes["ahe"] for s in shapes.values()), shapes
    assert all(r == reports["ahe"] and r for r in reports.values()), reports
