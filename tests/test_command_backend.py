"""The `command` backend (docs/backends.md): a command-line agent runs inside the trial's sandbox
and reaches the model only through the gateway's OpenAI face. Real parts throughout: `ahe eval`
in a subprocess, bubblewrap, the scripted mock model over HTTP, a small stdlib CLI agent in the
harness (tests/fixtures/command_agent/harness) and, when installed, aider from PyPI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ahe.agents.command_backend import CommandBackend
from ahe.sandbox.bwrap import DEFAULT_PATH
from tests.docker_support import base_image, docker_engine  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "command_agent"
TASKS = ROOT / "examples" / "tasks"
WRITE_FILE = ROOT / "examples" / "policies" / "write-file.yaml"
pytestmark = pytest.mark.bwrap


def run_eval(tmp_path: Path, harness: Path, task: str, policy: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    p = subprocess.run([sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(harness), "--tasks", str(TASKS),
                        "--task", task, "--mock-policy", str(policy), "--out", str(out), "--json", *args],
                       capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    return p, out / "rollouts" / task / "trial-1"


def cli_harness(tmp_path: Path, **changes) -> Path:
    """A copy of the scripted CLI's harness with harness.yaml keys changed."""
    h = tmp_path / "harness"
    shutil.copytree(FIXTURES / "harness", h)
    data = yaml.safe_load((h / "harness.yaml").read_text())
    data.update(changes)
    (h / "harness.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return h


def test_a_cli_agent_runs_in_the_sandbox_and_reaches_the_model_through_the_gateway(tmp_path: Path) -> None:
    h = cli_harness(tmp_path, command="ls -A {{ harness_dir }} > /app/harness-listing.txt; cp /tmp/cfg.json /app/; "
                                       "python3 {{ harness_dir }}/cli_agent.py {{ instruction_file }} {{ trajectory_path }}",
                    config_files={"/tmp/cfg.json": "cfg.json.j2"})
    (h / "cfg.json.j2").write_text('{"url": "{{ base_url }}", "key": "{{ api_key }}", "model": "{{ model }}"}\n')
    subprocess.run(["git", "init", "-q", str(h)], check=True)  # a run's workspace is a git repository
    p, trial = run_eval(tmp_path, h, "word-frequency-top", WRITE_FILE, "--keep-app")
    assert p.returncode == 0, p.stderr
    result = json.loads((trial / "result.json").read_text())
    assert result["error_class"] is None and result["stop_reason"] == "no_tool_call"
    assert result["turns"] == 3 and result["tool_calls"] == 2  # three model calls, two shell commands
    assert result["usage"]["prompt_tokens"] == 580  # the gateway's meter (120 + 200 + 260)
    assert (trial / "app" / "hello.txt").read_text() == "hello from the mock agent\n"  # it ran in /app
    calls = [json.loads(line) for line in (trial / "conversation.jsonl").read_text().splitlines()]
    assert len(calls) == 3 and calls[0]["messages"][0]["content"].startswith("You are a careful coding agent")
    traj = json.loads((trial / "trajectory.json").read_text())
    assert traj["extra"]["trajectory_source"] == "cli" and traj["extra"]["final_answer"] == "Wrote /app/hello.txt."
    assert [s["source"] for s in traj["steps"]] == ["system", "user", "agent", "agent", "agent"]
    assert "hello.txt" in traj["steps"][2]["observation"]["results"][0]["content"]
    assert "python3 /tmp/ahe-harness/cli_agent.py" in (trial / "agent-output.txt").read_text().splitlines()[0]
    listing = (trial / "app" / "harness-listing.txt").read_text().split()
    assert sorted(listing) == sorted(["AGENTS.md", "cfg.json.j2", "cli_agent.py", "harness.yaml"])  # no git history
    cfg = json.loads((trial / "app" / "cfg.json").read_text())  # a config file rendered with the endpoint
    assert cfg["url"].startswith("http://127.0.0.1:") and cfg["url"].endswith("/v1")
    assert cfg["key"] == "sk-ahe-gateway-holds-the-key" and cfg["model"] == "mock"


def test_streaming_requests_are_answered_as_server_sent_events(tmp_path: Path) -> None:
    p, trial = run_eval(tmp_path, cli_harness(tmp_path, env={"CLI_STREAM": "1"}), "word-frequency-top", WRITE_FILE)
    assert p.returncode == 0, p.stderr
    result = json.loads((trial / "result.json").read_text())
    assert result["turns"] == 3 and result["tool_calls"] == 2 and result["error_class"] is None


def test_a_missing_or_malformed_trajectory_is_rebuilt_from_the_gateway(tmp_path: Path) -> None:
    for name, traj_path, tail in [("missing", "/tmp/never-written.json", ""),
                                  ("malformed", "/tmp/cli-messages.json", "; echo '{not json' > /tmp/cli-messages.json")]:
        base = tmp_path / name
        base.mkdir()
        h = cli_harness(base, trajectory={"path": traj_path, "format": "openai"},
                        command="python3 {{ harness_dir }}/cli_agent.py {{ instruction_file }} /tmp/cli-messages.json" + tail)
        p, trial = run_eval(base, h, "word-frequency-top", WRITE_FILE)
        assert p.returncode == 0, p.stderr
        result = json.loads((trial / "result.json").read_text())
        assert result["error_class"] is None and result["turns"] == 3 and result["tool_calls"] == 2
        traj = json.loads((trial / "trajectory.json").read_text())
        assert traj["extra"]["trajectory_source"] == "gateway" and traj["extra"]["final_answer"] == "Wrote /app/hello.txt."
        events = [json.loads(line) for line in (trial / "events.jsonl").read_text().splitlines()]
        note = next(e["reason"] for e in events if e["type"] == "trajectory_rebuilt")
        assert traj_path in note and ("wrote no trajectory" if name == "missing" else "is not a openai trajectory") in note


@pytest.mark.parametrize("command, sentence", [
    ("exit 3", "the agent command exited 3 without calling the model"),
    ("no-such-agent --go", "the agent command could not start (exit 127: bash: line 1: no-such-agent: command not found)"),
    ("echo 'usage: agent [--flag]' >&2; exit 2", "exited 2 without calling the model: usage: agent [--flag]"),
])
def test_a_command_that_cannot_run_is_one_sentence_per_trial(tmp_path: Path, command: str, sentence: str) -> None:
    p, trial = run_eval(tmp_path, cli_harness(tmp_path, command=command), "word-frequency-top", WRITE_FILE,
                        "--task", "fix-service-config")
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr  # 3: trials with infrastructure errors
    summary = json.loads(p.stdout)
    assert summary["infra_errors"] == 2 and summary["n_passed"] == 0  # classified and counted, the loop goes on
    result = json.loads((trial / "result.json").read_text())
    assert result["error_class"] == "infra" and sentence in result["error"]
    assert not (trial / "error.txt").exists()  # a sentence, not a traceback


async def test_harness_yaml_mistakes_are_one_sentence(tmp_path: Path) -> None:
    backend = CommandBackend()
    h = cli_harness(tmp_path)
    assert await backend.load_problem(h) is None
    cases = [
        ({"command": ""}, "field 'command': String should have at least 1 character"),
        ({"files": {"../../etc/passwd": "/app/x"}}, "'../../etc/passwd' is not a file or folder inside the harness"),
        ({"files": {"AGENTS.md": "app/AGENTS.md"}}, "'app/AGENTS.md' must be an absolute path in the sandbox"),
        ({"command": "run {{ instructions }}"}, "field 'command': 'instructions' is undefined; a template may use"),
        ({"trajectory": {"path": "out.json"}}, "field 'trajectory.path'"),
        ({"comand": "x"}, "field 'comand': Extra inputs are not permitted"),
    ]
    for change, sentence in cases:
        data = yaml.safe_load((FIXTURES / "harness" / "harness.yaml").read_text()) | change
        (h / "harness.yaml").write_text(yaml.safe_dump(data))
        problem = await backend.load_problem(h)
        assert problem is not None and sentence in problem and str(h / "harness.yaml") in problem, (change, problem)
    # the same through `ahe eval`: before any trial, non-zero, no traceback
    p, _ = run_eval(tmp_path, h, "word-frequency-top", WRITE_FILE)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "Extra inputs are not permitted" in " ".join(p.stderr.split())
    assert not (tmp_path / "out" / "rollouts").exists()


def test_the_component_map_names_each_file_of_a_cli_harness(tmp_path: Path) -> None:
    h = cli_harness(tmp_path)
    (h / "skills" / "verify").mkdir(parents=True)
    (h / "skills" / "verify" / "SKILL.md").write_text("check the output\n")
    (h / "hooks").mkdir()
    (h / ".mcp.json").write_text("{}")
    got = {c.path: c.component for c in CommandBackend().components(h)}
    assert got == {"harness.yaml": "middleware", "cli_agent.py": "tool_implementation", "AGENTS.md": "system_prompt",
                   "skills/": "skill", "hooks/": "middleware", ".mcp.json": "tool_implementation"}
    assert CommandBackend.replayable is False


def installed(name: str) -> str:
    found = shutil.which(name, path=DEFAULT_PATH)
    if found is None:
        why = f"{name} is not installed where the sandbox sees it (bash .ci/install-cli-agents.sh)"
        if os.environ.get("AHE_REQUIRE_CLI_AGENTS"):
            pytest.fail(why)
        pytest.skip(why)
    return found


@pytest.fixture
def aider() -> str:
    return installed("aider")


@pytest.fixture
def opencode() -> str:
    return installed("opencode")


def test_aider_from_pypi_fixes_a_task_offline_against_the_scripted_model(tmp_path: Path, aider: str) -> None:
    p, trial = run_eval(tmp_path, FIXTURES / "aider", "fix-service-config", FIXTURES / "aider" / "policy.yaml")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    output = (trial / "agent-output.txt").read_text()
    assert summary["pass_at_1"] == 1.0, output[-3000:]  # aider's whole-file edit, graded by the task's verifier
    assert "Applied edit to config/service.ini" in output
    calls = [json.loads(line) for line in (trial / "conversation.jsonl").read_text().splitlines()]
    assert len(calls) == 1 and "Keep every section and key" in json.dumps(calls[0]["messages"])  # its CONVENTIONS.md
    result = json.loads((trial / "result.json").read_text())
    assert result["usage"]["prompt_tokens"] > 0 and result["turns"] == 1
    traj = json.loads((trial / "trajectory.json").read_text())
    assert traj["extra"]["trajectory_source"] == "gateway" and "config/service.ini" in traj["extra"]["final_answer"]


def test_opencode_from_npm_fixes_a_task_offline_against_the_scripted_model(tmp_path: Path, opencode: str) -> None:
    """opencode streams (server-sent events) and asks for a session title on the side; its tools
    are its own (`bash`); it finds the gateway in the opencode.json rendered from the harness."""
    p, trial = run_eval(tmp_path, FIXTURES / "opencode", "fix-service-config", FIXTURES / "opencode" / "policy.yaml")
    assert p.returncode == 0, p.stderr
    output = (trial / "agent-output.txt").read_text()
    assert json.loads(p.stdout)["pass_at_1"] == 1.0, output[-3000:]
    calls = [json.loads(line) for line in (trial / "conversation.jsonl").read_text().splitlines()]
    assert sorted(c["call"] for c in calls) == [1, 2, 3]  # the title call overlaps the first turn
    assert any("You are a careful coding agent" in json.dumps(c["messages"]) for c in calls)  # its AGENTS.md
    traj = json.loads((trial / "trajectory.json").read_text())  # rebuilt from the agent's thread, not the title call
    assert traj["steps"][2]["tool_calls"][0]["function_name"] == "bash"
    assert traj["extra"]["final_answer"] == "Fixed config/service.ini; the validator prints OK."


@pytest.mark.docker
def test_a_cli_agent_runs_in_a_docker_sandbox_behind_the_gateway(tmp_path: Path, docker_engine) -> None:
    """The container has no network; the gateway's socket reaches it through a read-only mount of the
    trial's channel folder, and the forwarder runs on the container's own loopback."""
    from tests.command_support import build_python_image
    from tests.conftest import write_files

    image = build_python_image(docker_engine)
    tasks = write_files(tmp_path / "tasks", {
        "say-hello/task.toml": '[task]\nname = "say-hello"\n[agent]\ntimeout_sec = 120\n',
        "say-hello/instruction.md": "Write hello to /app/hello.txt.\n",
        "say-hello/environment/Dockerfile": f"FROM {image}\nWORKDIR /app\n",
        "say-hello/tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\ngrep -q 'hello from the mock agent' /app/hello.txt"
                                   " && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
    })
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    p = subprocess.run([sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(FIXTURES / "harness"), "--tasks",
                        str(tasks), "--mock-policy", str(WRITE_FILE), "--out", str(out), "--sandbox", "docker", "--json"],
                       capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    trial = out / "rollouts" / "say-hello" / "trial-1"
    result = json.loads((trial / "result.json").read_text())
    assert result["passed"] and result["turns"] == 3 and result["tool_calls"] == 2, result
    assert result["usage"]["prompt_tokens"] == 580
    assert not (trial / "channel").exists()  # the socket's folder is scratch


@pytest.mark.docker
def test_an_image_without_python3_is_one_sentence(tmp_path: Path, docker_engine, base_image) -> None:
    from tests.conftest import write_files

    tasks = write_files(tmp_path / "tasks", {
        "bare/task.toml": '[task]\nname = "bare"\n', "bare/instruction.md": "Do it.\n",
        "bare/environment/Dockerfile": f"FROM {base_image}\nWORKDIR /app\n",
        "bare/tests/test.sh": "#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n",
    })
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    p = subprocess.run([sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(FIXTURES / "harness"), "--tasks",
                        str(tasks), "--mock-policy", str(WRITE_FILE), "--out", str(tmp_path / "out"), "--sandbox", "docker",
                        "--json"], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
    result = json.loads((tmp_path / "out" / "rollouts" / "bare" / "trial-1" / "result.json").read_text())
    assert result["error_class"] == "infra" and result["error"].startswith("the sandbox has no python3")


class _Sandbox:
    """Only what the backend asks before it starts anything."""

    def __init__(self, network: bool, channel: tuple | None = None) -> None:
        self.network, self._channel = network, channel

    def channel(self):
        return self._channel


@pytest.mark.parametrize("sandbox, sentence", [
    (None, "runs the agent inside the trial's sandbox, and this session has none"),
    (_Sandbox(network=True), "the task's sandbox has network access"),
    (_Sandbox(network=False), "shares no folder with the host for the gateway's socket"),
])
async def test_a_sandbox_the_cli_could_leave_is_refused(tmp_path: Path, sandbox, sentence: str) -> None:
    from ahe.agents import AgentRequest
    from ahe.llm.types import ModelResponse

    class Client:
        role, model = "agent", "m"

        async def complete(self, *a, **k) -> ModelResponse:
            raise AssertionError("no model call may happen")

    res = await CommandBackend().run(AgentRequest(harness=FIXTURES / "harness", instruction="x", trace_dir=tmp_path,
                                                  client=Client(), sandbox=sandbox))
    assert res.stop_reason.value == "infra_error" and res.infra_error_kind == "agent_command"
    assert sentence in res.detail


def test_trajectories_from_a_cli_file_or_the_gateway_record(tmp_path: Path) -> None:
    from ahe.agents.command_trajectory import parse_trajectory, trajectory_from_conversation

    rows = [  # the agent's first turn and a side call (a title) overlapping it, then the second turn
        {"call": 1, "prefix": 0, "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "do"}],
         "response": {"content": None, "tool_calls": [{"id": "c1", "name": "bash", "raw_arguments": '{"command": "ls"}'}]}},
        {"call": 2, "prefix": 0, "messages": [{"role": "user", "content": "title?"}], "response": {"content": "T"}},
        {"call": 3, "prefix": 0, "messages": [
            {"role": "system", "content": "S"}, {"role": "user", "content": "do"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                                 "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}], "response": {"content": "done"}},
        {"call": 4, "prefix": 0, "messages": [{"role": "user", "content": "summary?"}], "response": {"content": "sum"}},
    ]
    (tmp_path / "conversation.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"refused": "x"}\n')
    traj = trajectory_from_conversation(tmp_path / "conversation.jsonl")
    assert [s["source"] for s in traj["steps"]] == ["system", "user", "agent", "agent"]  # the longest thread
    assert traj["steps"][2]["tool_calls"][0]["arguments"] == {"command": "ls"}
    assert traj["steps"][2]["observation"]["results"][0]["content"] == "a.txt" and traj["extra"]["final_answer"] == "done"
    assert trajectory_from_conversation(tmp_path / "nothing.jsonl")["steps"] == []
    log = [{"role": "user", "content": "do"}, {"role": "assistant", "content": "ok"}]
    jsonl = "".join(json.dumps(m) + "\n" for m in log).encode()
    for data in (json.dumps(log).encode(), json.dumps({"messages": log}).encode(), jsonl):
        assert parse_trajectory(data, "openai", session_id="s")["extra"]["final_answer"] == "ok"
    atif = {"schema_version": "ATIF-v1.4", "steps": [{"step_id": 1, "source": "user", "message": "do"}]}
    assert parse_trajectory(json.dumps(atif).encode(), "atif", session_id="s") == atif
    for bad, fmt in [(b'{"steps": 3}', "atif"), (b'[{"no": "role"}]', "openai"), (b"{not json", "openai")]:
        with pytest.raises(ValueError):
            parse_trajectory(bad, fmt, session_id="s")


def test_a_cli_past_the_agent_timeout_is_a_timeout(tmp_path: Path) -> None:
    h = cli_harness(tmp_path, command="python3 {{ harness_dir }}/cli_agent.py {{ instruction_file }}; sleep 120")
    p, trial = run_eval(tmp_path, h, "word-frequency-top", WRITE_FILE, "--agent-timeout", "4")
    assert p.returncode == 0 and json.loads(p.stdout)["timeouts"] == 1, p.stderr
    result = json.loads((trial / "result.json").read_text())
    assert result["error_class"] == "agent_timeout" and result["error"] == "the agent command ran past 4s"
    assert result["turns"] == 3 and result["usage"]["prompt_tokens"] == 580  # what it did before is kept
