"""`ahe evolve` with the command backend on the bundled tasks (tests/command_support.py): the loop
runs a command-line agent's harness — rollouts through the backend, the evolve agent editing its
AGENTS.md, attribution, rollback, audit — with scripted MOCK models only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import command_support
from tests.command_support import X, Y, Z

pytestmark = [pytest.mark.bwrap, pytest.mark.xdist_group("command-scenario")]  # one evolve, one worker
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def command_run(tmp_path_factory) -> Path:
    return command_support.command_run(tmp_path_factory)


def test_evolve_runs_the_command_backend_through_every_phase(command_run: Path, tmp_path: Path) -> None:
    rollouts = sorted((command_run / "iterations" / "001" / "rollouts").glob("*/trial-*/result.json"))
    assert len(rollouts) == 6  # 3 tasks x k=2, each a CLI session in the sandbox behind the gateway
    for path in rollouts:
        result = json.loads(path.read_text())
        assert result["error_class"] is None and result["usage"]["prompt_tokens"] > 0
        assert (path.parent / "agent-output.txt").read_text().startswith("$ python3 /tmp/ahe-harness/cli_agent.py")
    passed = {p.parent.parent.name for p in rollouts if json.loads(p.read_text())["passed"]}
    assert passed == {Y}  # the seed AGENTS.md lacks the lesson X needs; Z is never solved
    for phase in ("analysis", "corpus", "evolve"):
        assert (command_run / "iterations" / "001" / phase).is_dir()
    audit = subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(command_run), "--json"], capture_output=True,
                           text=True, timeout=120, cwd=ROOT)
    assert audit.returncode == 0, audit.stderr
    report = subprocess.run([sys.executable, "-m", "ahe.cli", "report", str(command_run), "--out", str(tmp_path / "report.html")],
                            capture_output=True, text=True, timeout=120, cwd=ROOT)  # not into the shared run
    assert report.returncode == 0, report.stderr


def test_the_lesson_in_agents_md_is_kept_and_the_strict_cli_rolled_back(command_run: Path) -> None:
    audit = subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(command_run), "--json"], capture_output=True,
                           text=True, timeout=120, cwd=ROOT)
    iterations = json.loads(audit.stdout)["iterations"]
    it1 = iterations[0]
    changes = {c["id"]: c for c in it1["changes"]}
    assert changes["chg-1"]["component"] == "system_prompt" and changes["chg-1"]["files"] == ["AGENTS.md"]
    assert changes["chg-1"]["verdict"] == "keep" and changes["chg-1"]["reason"] == f"predicted fix improved: {X}"
    assert changes["chg-2"]["component"] == "tool_implementation" and changes["chg-2"]["files"] == ["cli_agent.py"]
    assert changes["chg-2"]["verdict"] == "rollback" and changes["chg-2"]["rollback_method"] == "git revert"
    assert changes["chg-2"]["reason"] == f"predicted fix did not improve; unpredicted regression of {Y}"
    assert changes["chg-2"]["predicted_fixes"] == {Z: "no change"}
    assert changes["chg-2"]["replay"]["replayable"] is False  # the CLI's tools are its own
    assert it1["improved"] == [X] and it1["regressed"] == [Y]
    assert [round(it["pass_at_1"], 3) for it in iterations] == [0.333, 0.333, 0.667, 0.667]
    assert "byte for byte" in (command_run / "workspace" / "AGENTS.md").read_text()
    assert "strict mode" not in (command_run / "workspace" / "cli_agent.py").read_text()
