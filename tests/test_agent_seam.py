"""The agent-backend seam (docs/backends.md): a backend from a plugin runs `ahe eval` end to end
through a real subprocess and the mock model over HTTP; harness.yaml and --agent-backend mistakes
are one sentence; the trial kinds dispatch the CI loop and the one-shot trial."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ahe.agents import backend_name, harness_backend, read_harness_file
from ahe.errors import AheError, ConfigError
from ahe.rollout.kinds import kind_for, trial_kind_names
from ahe.rollout.models import TrialSpec

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = ROOT / "tests" / "fixtures" / "plugins"


def _eval(tmp_path: Path, harness: Path, *args: str, plugins: str = "echo_agent") -> subprocess.CompletedProcess:
    env = dict(os.environ, AHE_PLUGINS=plugins)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGINS), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(harness), "--tasks",
         str(ROOT / "examples" / "tasks"), "--task", "word-frequency-top", "--mock-policy",
         str(ROOT / "examples" / "policies" / "write-file.yaml"), "--out", str(tmp_path / "out"), "--json", *args],
        capture_output=True, text=True, timeout=240, env=env, cwd=tmp_path)


def _echo_harness(tmp_path: Path, yaml_text: str | None = "backend: echo\n") -> Path:
    h = tmp_path / "h"
    h.mkdir()
    (h / "prompt.md").write_text("You are terse.\n")
    if yaml_text is not None:
        (h / "harness.yaml").write_text(yaml_text)
    return h


def test_a_plugin_backend_runs_eval_and_the_gateway_meters_it(tmp_path: Path) -> None:
    p = _eval(tmp_path, _echo_harness(tmp_path))
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["n_trials"] == 1 and res["pass_at_1"] == 0.0  # one call, no tool: nothing is done
    trial = tmp_path / "out" / "rollouts" / "word-frequency-top" / "trial-1"
    result = json.loads((trial / "result.json").read_text())
    assert result["turns"] == 1 and result["error_class"] is None
    assert result["usage"]["prompt_tokens"] > 0  # from the gateway's meter
    conversation = (trial / "conversation.jsonl").read_text().splitlines()
    assert len(conversation) == 1 and "You are terse." in conversation[0]
    # the backend wrote no trajectory: the debugger's trajectory.json is the gateway's record, rebuilt
    traj = json.loads((trial / "trajectory.json").read_text())
    assert traj["steps"][0]["message"] == "You are terse.\n" and traj["extra"]["stop_reason"] == "no_tool_call"


def test_backend_mistakes_are_one_sentence(tmp_path: Path) -> None:
    h = _echo_harness(tmp_path, "backend: nosuch\n")
    p = _eval(tmp_path, h)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert f"{h / 'harness.yaml'}: backend: no agent backend 'nosuch'; use one of: ahe, command, echo" in " ".join(p.stderr.split())
    (h / "harness.yaml").write_text("backend: echo\n")
    p = _eval(tmp_path, h, "--agent-backend", "ahe")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "names backend 'echo' but --agent-backend says 'ahe'" in " ".join(p.stderr.split())
    (h / "prompt.md").unlink()  # the backend's own load check, before any trial starts
    p = _eval(tmp_path, h)
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "prompt.md: missing — an echo harness is one prompt.md" in " ".join(p.stderr.split())
    assert not (tmp_path / "out" / "rollouts").exists()


def test_harness_yaml_is_read_strictly(tmp_path: Path) -> None:
    h = _echo_harness(tmp_path, "backend: [a, b]\n")
    with pytest.raises(ConfigError, match=r"harness.yaml: field 'backend'"):
        read_harness_file(h)
    (h / "harness.yaml").write_text("backend: ahe\n  bad: : indent\n")
    with pytest.raises(ConfigError, match=r"harness.yaml: not readable YAML"):
        read_harness_file(h)
    (h / "harness.yaml").write_text("- a list\n")
    with pytest.raises(ConfigError, match=r"must be a mapping"):
        read_harness_file(h)
    (h / "harness.yaml").write_text("backend: ahe\nconfig: mini.yaml\n")
    assert read_harness_file(h).settings() == {"config": "mini.yaml"}
    assert backend_name(ROOT / "harness_workspace") == "ahe"  # no harness.yaml: AHE's runtime
    with pytest.raises(AheError, match="--agent-backend: no agent backend 'nope'"):
        harness_backend(ROOT / "harness_workspace", "nope")


def test_trial_kinds_send_ci_tasks_to_the_ci_loop(tmp_path: Path) -> None:
    def spec(task_dir: Path) -> TrialSpec:
        return TrialSpec(task_dir=task_dir, task_name=task_dir.name, trial=1, trial_dir=tmp_path / "t",
                         workspace=ROOT / "harness_workspace")

    ci_task = next((ROOT / "examples" / "swe-ci").glob("*/task.toml")).parent
    assert kind_for(spec(ci_task)).name == "ci-loop"
    assert kind_for(spec(ROOT / "examples" / "tasks" / "hello-file")).name == "one-shot"
    assert trial_kind_names()[-1] == "one-shot"
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "task.toml").write_text("[ci]\nrounds = 'many'\n")
    assert kind_for(spec(broken)).name == "ci-loop"  # a broken [ci] table is the CI kind's to report


def _echo_repo(tmp_path: Path):
    import sys

    from ahe.harness.repo import HarnessRepo

    sys.path.insert(0, str(PLUGINS))
    import echo_agent  # noqa: F401 - registers the `echo` backend in this process

    seed = _echo_harness(tmp_path)
    return HarnessRepo.create(tmp_path / "ws", seed)


def _change(repo, cid: str, files: list[str]):
    from ahe.harness.manifest import ChangeEntry

    commit = repo.commit_paths(files, cid)
    return ChangeEntry(id=cid, component="system_prompt", files=files, summary="a change for the test",
                       root_cause="a cause", targeted_fix="a fix", commit=commit)


@pytest.mark.bwrap
async def test_the_gate_checks_another_backends_harness_with_that_backend(tmp_path: Path) -> None:
    from ahe.harness.manifest import Manifest
    from evolve_agent import run_gate
    from evolve_agent.components import component_map_lines

    repo = _echo_repo(tmp_path)
    base = repo.head()
    assert component_map_lines(repo.path)[1:] == ["- /workspace/prompt.md: system_prompt",
                                                   component_map_lines(repo.path)[-1]]
    assert "replayable: false" in component_map_lines(repo.path)[-1]
    (repo.path / "prompt.md").write_text("You are terse and careful.\n")
    good = _change(repo, "chg-1", ["prompt.md"])
    (repo.path / "prompt.md").unlink()
    broken = _change(repo, "chg-2", ["prompt.md"])
    manifest = Manifest(iteration=1, base_commit=base, changes=[good, broken])
    await run_gate(repo, manifest, trace_dir=tmp_path / "gate")
    assert [c.status for c in manifest.changes] == ["accepted", "rejected"], [c.gate_errors for c in manifest.changes]
    assert any("prompt.md: missing — an echo harness is one prompt.md" in e for e in manifest.changes[1].gate_errors)
    # the smoke session ran through the backend, behind a gateway that recorded its one request
    assert (tmp_path / "gate" / "chg-1" / "conversation.jsonl").is_file()
    assert (repo.path / "prompt.md").read_text() == "You are terse and careful.\n"


@pytest.mark.bwrap
async def test_the_gate_refuses_a_change_of_backend(tmp_path: Path) -> None:
    from ahe.harness.manifest import Manifest
    from evolve_agent import run_gate

    repo = _echo_repo(tmp_path)
    base = repo.head()
    (repo.path / "harness.yaml").write_text("backend: ahe\n")
    manifest = Manifest(iteration=1, base_commit=base, changes=[_change(repo, "chg-1", ["harness.yaml"])])
    await run_gate(repo, manifest, trace_dir=tmp_path / "gate")
    assert manifest.changes[0].status == "rejected"
    assert any("changes the agent backend from 'echo' to 'ahe'" in e for e in manifest.changes[0].gate_errors)


def test_replay_foresight_says_a_non_replayable_backend_is_not_replayed(tmp_path: Path) -> None:
    from evolve_agent.foresight import _backend_not_replayable

    repo = _echo_repo(tmp_path)
    assert "echo backend's recorded steps cannot be re-run" in _backend_not_replayable(repo.path)
    assert _backend_not_replayable(ROOT / "harness_workspace") is None


@pytest.mark.parametrize("harness,file,key,value", [
    (ROOT / "examples" / "mini-swe-agent", "mini.yaml", "model.model_kwargs", {"temperature": 1.5}),
    (ROOT / "examples" / "mini-swe-agent", "harness.yaml", "config", "other.yaml"),
    (ROOT / "tests" / "fixtures" / "command_agent" / "harness", "harness.yaml", "max_requests", 100000),
])
def test_another_backends_protected_keys_refuse_an_edit(harness: Path, file: str, key: str, value) -> None:
    """The keys that play agent.yaml's llm block's part for another backend stay as at the base."""
    import yaml

    from evolve_agent.protected import BaseSnapshot

    read = lambda rel: (harness / rel).read_text() if (harness / rel).is_file() else None  # noqa: E731
    base = BaseSnapshot.from_reader(read)
    assert base.check_tree(harness) == []
    data = yaml.safe_load(read(file))
    node = data
    *parents, last = key.split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    problem = base.check_file(file, yaml.safe_dump(data))
    assert problem is not None and f"{key} in {file} is protected for the {base.backend} backend" in problem
    assert base.check_file(file, read(file)) is None  # unchanged: fine
