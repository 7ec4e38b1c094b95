"""The seed harness end to end: real HTTP to the mock, real bwrap, a real file written."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, SEED
from tests.docker_support import base_image, docker_engine  # noqa: F401  (fixtures)

POLICY = REPO / "examples" / "policies" / "write-file.yaml"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install -y bubblewrap)")


@needs_bwrap
async def test_seed_session_writes_a_file_and_trace_matches_policy(mock_llm, tmp_path):
    import yaml

    from ahe.runtime import Session, StopReason, load_agent
    from ahe.sandbox.local import LocalSandbox

    mock = mock_llm(yaml.safe_load(POLICY.read_text()))
    app = tmp_path / "app"
    app.mkdir()
    sandbox = LocalSandbox(app, root_dir=tmp_path / "sbx", isolation="bwrap")
    await sandbox.start()
    try:
        res = await Session(load_agent(SEED), mock.client(), sandbox=sandbox, trace_dir=tmp_path / "trace").run("write hello")
    finally:
        await sandbox.stop()
    assert res.stop_reason == StopReason.no_tool_call and res.final_answer == "Wrote /app/hello.txt."
    assert (app / "hello.txt").read_text() == "hello from the mock agent\n"
    traj = json.loads((tmp_path / "trace" / "trajectory.json").read_text())
    assert [s["source"] for s in traj["steps"]] == ["system", "user", "agent", "agent", "agent"]
    calls = [s["tool_calls"][0] for s in traj["steps"] if s.get("tool_calls")]
    assert [c["function_name"] for c in calls] == ["run_shell_command", "run_shell_command"]
    assert calls[1]["arguments"] == {"command": "cat /app/hello.txt"}
    obs = traj["steps"][3]["observation"]["results"][0]["content"]
    assert obs.startswith("exit code: 0\nhello from the mock agent")
    metrics = [(s["metrics"]["prompt_tokens"], s["metrics"]["completion_tokens"]) for s in traj["steps"] if s["source"] == "agent"]
    assert metrics == [(120, 30), (200, 12), (260, 8)]
    assert traj["final_metrics"]["total_prompt_tokens"] == 580 and traj["final_metrics"]["total_completion_tokens"] == 50
    assert res.usage.prompt_tokens == 580 and res.turns == 3 and res.tool_calls == 2


@needs_bwrap
def test_ahe_run_command_with_mock_policy(tmp_path):
    """The README's run command, as a user would type it."""
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "ahe.cli", "run", "--workspace", str(SEED), "--instruction", "write hello",
         "--mock-policy", str(POLICY), "--out", str(out)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out / "trajectory.json")
    assert "MOCK" in proc.stderr
    assert (out / "app" / "hello.txt").read_text() == "hello from the mock agent\n"
    result = json.loads((out / "result.json").read_text())
    assert result["stop_reason"] == "no_tool_call" and result["turns"] == 3


def test_ahe_run_bad_workspace_is_one_clear_sentence(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "ahe.cli", "run", "--workspace", str(tmp_path / "nope"), "--instruction", "x"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert "not found — is" in proc.stderr and "Traceback" not in proc.stderr


@needs_bwrap
def test_ahe_run_on_a_bundled_task_runs_its_verifier(tmp_path):
    """`ahe run --task`: the task's environment and instruction, then its verifier."""
    import yaml

    task = REPO / "examples" / "tasks" / "word-frequency-top"
    solve = (task / "solution" / "solve.sh").read_text()
    policy = {"rules": [{"match": {"turn": 1}, "tool_calls": [{"name": "run_shell_command", "arguments": {"command": solve}}]},
                        {"reply": "done"}]}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(policy))
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "ahe.cli", "run", "--workspace", str(SEED), "--task", str(task),
         "--mock-policy", str(tmp_path / "p.yaml"), "--out", str(out)],
        capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["verifier"]["passed"] is True and result["verifier"]["reward"] == 1.0
    first_user = json.loads((out / "trajectory.json").read_text())["steps"][1]["message"]
    assert first_user == (task / "instruction.md").read_text()


def test_doctor_reports_each_check_as_json():
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "doctor", "--json"], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    data = json.loads(proc.stdout)
    names = {c["name"] for c in data["checks"]}
    assert {"python", "bubblewrap (local sandbox)", "docker engine (docker sandbox)", "git identity", "model endpoint"} <= names
    endpoint = next(c for c in data["checks"] if c["name"] == "model endpoint")
    assert endpoint["ok"] is False and "AHE_MODEL" in endpoint["fix"]  # env was cleared above
    assert proc.returncode == (0 if data["ok"] else 1)


@pytest.mark.docker
def test_doctor_says_whether_the_engine_runs_the_harness_worker(docker_engine, base_image):
    """With an engine up, the doctor starts this machine's interpreter in a container, as every
    docker trial's confined worker is started (ahe/confine/container.py), and says so."""
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "doctor", "--json"], capture_output=True, text=True,
                          timeout=120)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    worker = checks["harness worker's container (docker sandbox)"]
    assert worker["ok"] is True and "interpreter starts in" in worker["detail"], worker
