"""The mini-swe-agent backend (docs/backends.md): `ahe eval` (a real subprocess, the mock model over
HTTP, the confined worker in bwrap, the local sandbox) on mini configs copied from mini's own
package; what mini would reject is one sentence naming the file and field; the trajectory is
ATIF with mini's exit statuses mapped to AHE's stop reasons."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ahe.agents import harness_backend
from ahe.agents.mini_trajectory import counts, mini_to_atif, stop_of
from ahe.errors import InfrastructureError
from ahe.runtime import StopReason
from tests.conftest import write_files
from tests.docker_support import base_image, docker_engine  # noqa: F401  (fixtures)
from tests.mini_support import mini_harness, needs_mini

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "examples" / "tasks"
TASK = "fix-service-config"
SOLVE = (TASKS / TASK / "solution" / "solve.sh").read_text()
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def _policy(tmp_path: Path, rules: list[dict]) -> Path:
    p = tmp_path / "policy.yaml"
    p.write_text(yaml.safe_dump({"name": "mini test (scripted MOCK)", "rules": rules,
                                 "default": {"reply": "mock: no rule"}}, sort_keys=False))
    return p


def _bash(turn: int, command: str, **match) -> dict:
    return {"match": {"turn": turn, **match}, "tool_calls": [{"name": "bash", "arguments": {"command": command}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10}}


def _eval(tmp_path: Path, harness: Path, policy: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run(
        [sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(harness), "--tasks", str(TASKS), "--task", TASK,
         "--mock-policy", str(policy), "--out", str(tmp_path / "out"), "--json", *args],
        capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)


def _trial(tmp_path: Path) -> Path:
    return tmp_path / "out" / "rollouts" / TASK / "trial-1"


@needs_mini
@pytest.mark.bwrap
def test_eval_runs_mini_config_copied_from_its_package(tmp_path: Path) -> None:
    harness = mini_harness(tmp_path / "h")
    p = _eval(tmp_path, harness, _policy(tmp_path, [_bash(1, SOLVE, tools_include="bash"), _bash(2, SUBMIT)]),
              "--isolation", "bwrap")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["pass_at_1"] == 1.0
    trial = _trial(tmp_path)
    result = json.loads((trial / "result.json").read_text())
    assert (result["stop_reason"], result["turns"], result["tool_calls"], result["error_class"]) == ("stop_tool", 2, 2, None)
    assert result["usage"]["prompt_tokens"] == 200  # the gateway's meter
    traj = json.loads((trial / "trajectory.json").read_text())  # rebuilt by the host from the gateway's record
    assert traj["schema_version"].startswith("ATIF") and traj["extra"]["stop_reason"] == "stop_tool"
    sources = [s["source"] for s in traj["steps"]]
    assert sources == ["system", "user", "agent", "agent"] and traj["agent"]["name"] == "mini-swe-agent"
    assert "Please solve this issue" in traj["steps"][1]["message"]  # mini's own instance template
    solve = traj["steps"][2]
    assert solve["tool_calls"][0]["function_name"] == "bash" and "service.ini" in solve["tool_calls"][0]["arguments"]["command"]
    result0 = solve["observation"]["results"][0]
    assert '"returncode": 0' in result0["content"]  # mini's observation template, run in the sandbox
    assert result0["extra"]["returncode"] == 0 and result0["extra"]["claimed_metadata"]  # lent by mini's own view
    assert traj["steps"][3]["observation"]["results"][0]["extra"]["claimed"]  # the submit: the model never saw it
    claim = json.loads((trial / "trajectory.claimed.json").read_text())  # mini's messages, converted in the jail
    assert claim["extra"]["exit_status"] == "Submitted" and claim["agent"]["name"] == "mini-swe-agent"
    assert len((trial / "conversation.jsonl").read_text().splitlines()) == 2


@needs_mini
def test_text_based_config_format_error_and_step_limit(tmp_path: Path) -> None:
    harness = mini_harness(tmp_path / "h", source="mini_textbased.yaml",  # as `mini -c mini_textbased.yaml
                           edit={"agent": {"step_limit": 3}, "model": {"model_class": "litellm_textbased"}})  # -c model.model_class=...`
    block = "Let me look.\n\n```mswea_bash_command\n{}\n```\n"
    rules = [{"match": {"last_user_contains": "Please solve this issue"}, "reply": "I will just think about it."},
             {"match": {"last_user_contains": "EXACTLY ONE action"}, "reply": block.format("ls /app")},
             {"match": {"last_user_contains": "<returncode>"}, "reply": block.format("cat /app/validate.py | head -3")}]
    p = _eval(tmp_path, harness, _policy(tmp_path, rules))
    assert p.returncode == 0, p.stderr
    result = json.loads((_trial(tmp_path) / "result.json").read_text())
    assert (result["stop_reason"], result["turns"], result["tool_calls"], result["passed"]) == ("max_turns", 3, 2, False)
    claim = json.loads((_trial(tmp_path) / "trajectory.claimed.json").read_text())  # mini's view, converted
    notes = [s for s in claim["steps"] if (s.get("extra") or {}).get("framework_note")]
    assert len(notes) == 1 and "EXACTLY ONE action" in notes[0]["message"]
    unparsed = [s for s in claim["steps"] if (s.get("extra") or {}).get("unparsed")]
    assert unparsed[0]["message"] == "I will just think about it."
    observed = [s["observation"]["results"][0]["content"] for s in claim["steps"] if s.get("observation")]
    assert any("validate.py" in o for o in observed)  # `ls /app` ran in the task's sandbox
    traj = json.loads((_trial(tmp_path) / "trajectory.json").read_text())  # the gateway's: text replies, user observations
    assert traj["steps"][2]["message"] == "I will just think about it."
    assert any("validate.py" in s["message"] for s in traj["steps"] if s["source"] == "user")


@needs_mini
@pytest.mark.parametrize("case", ["rejected", "template", "yaml", "missing", "model_class"])
def test_bad_mini_config_is_one_sentence(tmp_path: Path, case: str) -> None:
    edit = {"rejected": {"agent": {"instance_template": None}}, "template": {"agent": {"system_template": "Hi {{ nosuch }}"}},
            "model_class": {"model": {"model_class": "mine.Model"}}}.get(case)
    harness = mini_harness(tmp_path / "h", edit=edit if edit is not None else {})
    if case == "yaml":
        (harness / "mini.yaml").write_text("agent:\n  system_template: [unclosed\n")
    if case == "missing":
        (harness / "mini.yaml").unlink()
    p = _eval(tmp_path, harness, _policy(tmp_path, []))
    err = " ".join(p.stderr.split())
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    expected = {"rejected": "mini.yaml: field 'agent.instance_template': Field required",
                "template": "mini.yaml: field 'agent.system_template' does not render: UndefinedError: 'nosuch' is undefined",
                "yaml": "mini.yaml: not readable YAML",
                "missing": "mini.yaml: not found",
                "model_class": "mini.yaml: field 'model.model_class' is 'mine.Model'"}[case]
    assert str(harness) in err and expected in err, err
    assert not (tmp_path / "out" / "rollouts").exists()  # nothing started


def test_without_the_extra_the_load_check_names_it(monkeypatch, tmp_path: Path) -> None:
    import ahe.agents.mini_backend as mb

    monkeypatch.setattr(mb, "mini_installed", lambda: False)
    (tmp_path / "harness.yaml").write_text("backend: mini-swe-agent\n")
    problem = asyncio.run(harness_backend(tmp_path).load_problem(tmp_path))
    assert problem == "mini-swe-agent is not installed; install AHE's `mini` extra: pip install 'ahe[mini]'"


def test_component_map_of_a_mini_config(tmp_path: Path) -> None:
    (tmp_path / "harness.yaml").write_text("backend: mini-swe-agent\nconfig: conf/agent.yaml\n")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "agent.yaml").write_text(yaml.safe_dump({
        "agent": {"system_template": "s", "instance_template": "{{task}}", "step_limit": 5, "agent_class": "loops.mine.Agent"},
        "environment": {"timeout": 5, "environment_class": "myenv.Env"},
        "model": {"observation_template": "{{output.output}}", "format_error_template": "bad", "model_name": "x"}}))
    got = {(c.path, c.component, c.note.split(":")[0]) for c in harness_backend(tmp_path).components(tmp_path)}
    assert got == {
        ("harness.yaml", "middleware", "names the backend and mini's config file (the backend is fixed for a run)"),
        ("conf/agent.yaml", "system_prompt", "agent.system_template"),
        ("conf/agent.yaml", "system_prompt", "agent.instance_template"),
        ("conf/agent.yaml", "middleware", "agent limits"),
        ("conf/agent.yaml", "middleware", "model.format_error_template"),
        ("conf/agent.yaml", "tool_implementation", "model.observation_template"),
        ("conf/agent.yaml", "tool_implementation", "environment"),
        ("loops/mine.py", "middleware", "agent class loops.mine.Agent"),
        ("myenv.py", "tool_implementation", "environment class myenv.Env"),
    }
    assert harness_backend(tmp_path).replayable is False


def test_mini_messages_become_atif_and_stop_reasons() -> None:
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"},
            {"role": "assistant", "content": "look", "extra": {"actions": [{"command": "ls", "tool_call_id": "c1"}],
                                                               "usage": {"prompt_tokens": 7, "completion_tokens": 2}}},
            {"role": "tool", "tool_call_id": "c1", "content": "out", "extra": {"returncode": 2}},
            {"role": "user", "content": "fix your format", "extra": {"interrupt_type": "FormatError", "model_response": "hm"}},
            {"role": "assistant", "content": "", "extra": {"actions": [{"command": "echo COMPLETE"}]}},
            {"role": "exit", "content": "diff", "extra": {"exit_status": "Submitted", "submission": "diff"}}]
    traj = mini_to_atif(msgs, session_id="s", agent={"name": "mini-swe-agent"})
    assert [s["source"] for s in traj["steps"]] == ["system", "user", "agent", "agent", "user", "agent"]
    obs = traj["steps"][2]["observation"]["results"][0]
    assert (obs["source_call_id"], obs["content"], obs["extra"]["is_error"]) == ("c1", "out", True)
    assert traj["steps"][3]["extra"] == {"unparsed": True} and traj["steps"][4]["extra"]["framework_note"]
    assert traj["steps"][5]["observation"]["results"][0]["content"] == "diff"  # the submission
    assert traj["final_metrics"]["total_prompt_tokens"] == 7
    assert counts(msgs) == (2, 2, 1)
    assert stop_of("Submitted", None)[0] == StopReason.stop_tool
    assert stop_of("LimitsExceeded", None)[0] == StopReason.max_turns
    assert stop_of("TimeExceeded", None)[0] == StopReason.wall_clock
    assert stop_of("RepeatedFormatError", None)[0] == StopReason.no_tool_call
    assert stop_of("", InfrastructureError("down", kind="endpoint"))[::2] == (StopReason.infra_error, "endpoint")
    reason, detail, _ = stop_of("KeyError", KeyError("x"))
    assert reason == StopReason.middleware_stop and "KeyError" in detail


@needs_mini
@pytest.mark.docker
def test_eval_runs_mini_in_the_docker_sandbox(tmp_path: Path, docker_engine, base_image) -> None:  # noqa: F811
    """The worker stays in its jail on the host; mini's commands run in the task's container."""
    tasks = write_files(tmp_path / "tasks", {f"write-ok/{name}": text for name, text in {
        "task.toml": '[task]\nname = "write-ok"\n[agent]\ntimeout_sec = 120\n',
        "instruction.md": "Write ok to /app/out.txt.\n",
        "environment/Dockerfile": f"FROM {base_image}\nWORKDIR /app\n",
        "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n"
                         "grep -q ok /app/out.txt && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
    }.items()})
    policy = _policy(tmp_path, [_bash(1, "echo ok > /app/out.txt && cat /etc/hostname"), _bash(2, SUBMIT)])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(mini_harness(tmp_path / "h")),
                        "--tasks", str(tasks), "--mock-policy", str(policy), "--out", str(tmp_path / "out"),
                        "--sandbox", "docker", "--json"], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["pass_at_1"] == 1.0
    result = json.loads((tmp_path / "out" / "rollouts" / "write-ok" / "trial-1" / "result.json").read_text())
    assert (result["stop_reason"], result["turns"]) == ("stop_tool", 2)


@needs_mini
@pytest.mark.parametrize("source", ["mini.yaml", "mini_textbased.yaml"])
def test_the_gates_smoke_session_runs_a_mini_harness_to_its_end(tmp_path: Path, source: str) -> None:
    from evolve_agent.backend_smoke import backend_smoke_check

    edit = {"model": {"model_class": "litellm_textbased"}} if "text" in source else {}
    harness = mini_harness(tmp_path / "h", source=source, edit=edit)
    backend = harness_backend(harness)
    report = asyncio.run(backend_smoke_check(backend, harness, trace_dir=tmp_path / "smoke"))
    assert report.errors == [] and report.stop_reason == "stop_tool", report
    traj = json.loads((tmp_path / "smoke" / "trajectory.json").read_text())
    assert "AHE smoke check" in json.dumps(traj["steps"][2:])  # the command and its output, as the model saw them


@needs_mini
def test_a_harness_class_that_fails_mid_session_is_that_trials_failure(tmp_path: Path) -> None:
    """A custom agent class that loads but raises in its first step: the trial ends (stop_reason
    middleware_stop, the exception named in the trajectory), scored, counted; the eval goes on."""
    boom = ("from minisweagent.agents.default import DefaultAgent\n\n\nclass Boom(DefaultAgent):\n"
            "    def step(self):\n        raise RuntimeError('boom in step')\n")
    harness = mini_harness(tmp_path / "h", edit={"agent": {"agent_class": "loops.boom.Boom"}},
                           files={"loops/__init__.py": "", "loops/boom.py": boom})
    p = _eval(tmp_path, harness, _policy(tmp_path, [_bash(1, SOLVE)]))
    assert p.returncode == 0, p.stderr
    result = json.loads((_trial(tmp_path) / "result.json").read_text())
    assert (result["stop_reason"], result["error_class"], result["passed"]) == ("middleware_stop", None, False)
    traj = json.loads((_trial(tmp_path) / "trajectory.json").read_text())
    assert traj["extra"]["detail"] == "mini-swe-agent raised RuntimeError: boom in step"
    claim = json.loads((_trial(tmp_path) / "trajectory.claimed.json").read_text())
    assert claim["agent"]["agent_class"] == "loops.boom.Boom"
    assert result["stop_detail"] == "mini-swe-agent raised RuntimeError: boom in step"  # in result.json too
    # and the gate's smoke session refuses such a change: the harness's own code ended it
    from evolve_agent.backend_smoke import backend_smoke_check

    report = asyncio.run(backend_smoke_check(harness_backend(harness), harness, trace_dir=tmp_path / "smoke"))
    assert any("the harness's own code stopped the mini-swe-agent smoke session" in e and "boom in step" in e
               for e in report.errors), report.errors


def test_demo_backend_mistakes_are_one_sentence(monkeypatch, tmp_path: Path) -> None:
    import ahe.agents.mini_backend as mb
    from ahe.demo import run_demo
    from ahe.errors import AheError

    with pytest.raises(AheError, match=r"^--backend: the demo runs on ahe or mini-swe-agent, not 'nosuch'$"):
        run_demo(tmp_path / "d1", backend="nosuch")
    monkeypatch.setattr(mb, "mini_installed", lambda: False)
    with pytest.raises(AheError) as err:
        run_demo(tmp_path / "d2", backend="mini-swe-agent")
    assert str(err.value) == mb.MISSING and not (tmp_path / "d2").exists()
