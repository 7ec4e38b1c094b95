"""The plug-in seams of docs/architecture.md, used end to end: a sandbox backend and a task
source, each one module plus one registration (tests/fixtures/plugins), loaded by `ahe eval`
through AHE_PLUGINS in a real subprocess, with the scripted mock model over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ahe.sandbox.local import LocalSandbox

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "tests" / "fixtures" / "plugins"


def _env(tmp_path: Path, plugins: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGINS), env.get("PYTHONPATH")]))
    env["AHE_PLUGINS"] = plugins
    env["FAKE_SANDBOX_LOG"] = str(tmp_path / "sandboxes.log")
    return env


def _eval(tmp_path: Path, *args: str, plugins: str = "fake_sandbox,fake_source") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(ROOT / "harness_workspace"),
         "--mock-policy", str(ROOT / "examples" / "policies" / "write-file.yaml"),
         "--out", str(tmp_path / "out"), "--json", *args],
        capture_output=True, text=True, timeout=240, env=_env(tmp_path, plugins), cwd=tmp_path,
    )


@pytest.mark.skipif(not LocalSandbox.available()[0], reason="bubblewrap cannot start a jail here (the fake backend jails with it)")
def test_a_new_backend_and_a_new_source_run_under_ahe_eval(tmp_path: Path) -> None:
    p = _eval(tmp_path, "--tasks", "hello:2", "--sandbox", "fake", "-k", "2")
    assert p.returncode == 0, p.stderr
    results = json.loads(p.stdout)
    assert results["n_trials"] == 4 and results["pass_at_1"] == 1.0
    # the source wrote its folders under the run, and the backend made every trial's sandbox
    made = sorted((tmp_path / "out" / "tasks-source" / "hello").iterdir())
    assert [d.name for d in made] == ["hello-1", "hello-2"]
    lines = (tmp_path / "sandboxes.log").read_text().splitlines()
    assert sorted(lines) == ["hello-1 local"] * 2 + ["hello-2 local"] * 2
    assert json.loads((tmp_path / "out" / "rollouts" / "hello-2" / "trial-2" / "result.json").read_text())["passed"]


def test_unknown_backend_and_source_are_one_sentence(tmp_path: Path) -> None:
    p = _eval(tmp_path, "--tasks", "hello:1", "--sandbox", "cloud")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "'cloud': no such sandbox backend; use one of: docker, fake, local" in " ".join(p.stderr.split())
    p = _eval(tmp_path, "--tasks", "nosuch:1", plugins="")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "no task source called 'nosuch'" in " ".join(p.stderr.split())


def test_a_plugin_that_fails_to_import_is_named(tmp_path: Path) -> None:
    p = _eval(tmp_path, "--tasks", str(ROOT / "examples" / "tasks"), plugins="no_such_plugin_module")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "AHE_PLUGINS names 'no_such_plugin_module', which failed to import" in " ".join(p.stderr.split())
