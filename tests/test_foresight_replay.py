"""Regression foresight: each replayable kind of change against a recorded round.

The recorded round is written with the runtime's own trace writer; the harness is a real git
repository; replay loads both sides of each change through the real workspace loader.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evolve_agent.replay import ReplaySettings, render_for_agent, replay_change, replay_change_isolated
from tests.foresight_support import commit_change, git, harness_repo, shell, snapshot, with_middleware, write_trial

LONG = "exit code: 0\n" + "ERROR line\n" * 500


@pytest.fixture(scope="module")
def round_dir(tmp_path_factory) -> Path:
    it = tmp_path_factory.mktemp("run") / "iterations" / "001"
    for n in (1, 2):
        write_trial(it, "build-app", n, True, [[shell("ls")], [shell("rm -rf build && make", "exit code: 0\nbuilt\n")]])
        write_trial(it, "serve-api", n, False, [[shell("python3 server.py", "started in the background", background=True)],
                                                 [shell("curl -s localhost:8000", "exit code: 7\n")]])
    write_trial(it, "parse-logs", 1, True, [[shell("grep ERROR app.log", LONG)], [shell("python3 parse.py", "exit code: 0\nok\n")]])
    write_trial(it, "parse-logs", 2, False, [[shell("grep ERROR app.log", LONG)],
                                              [shell("python3 parse.py", "exit code: 1\nTraceback (most recent call last)\n")]])
    write_trial(it, "tidy", 1, True, [[shell("echo hi", "exit code: 0\nhi\n")]])
    return it


@pytest.fixture()
def repo(tmp_path) -> Path:
    return harness_repo(tmp_path / "workspace")


def _mw(repo: Path, body: str, cls: str = "M") -> str:
    code = f"from ahe.runtime import HookResult, Middleware\n\n\nclass {cls}(Middleware):\n{body}"
    return commit_change(repo, with_middleware(repo, "m", cls, code))


def _firsts(report) -> dict[str, str]:
    return {t.task: t.first.ref for t in report.tasks}


def test_deny(repo, round_dir):
    c = _mw(repo, "    def before_tool(self, ctx, call):\n"
                  "        if 'rm -rf' in call.arguments.get('command', ''):\n"
                  "            return HookResult(deny='destructive commands are not allowed')\n")
    r = replay_change(repo, c, round_dir)
    assert r.replayable and r.kinds == ["middleware"]
    assert _firsts(r) == {"build-app": "corpus/build-app/trial-1/step-004.md"}
    assert [t.trial for t in r.tasks[0].trials] == ["trial-1", "trial-2"]
    assert r.tasks[0].first.reasons == ["call run_shell_command denied: destructive commands are not allowed"]
    assert r.at_risk == ["build-app"] and r.trials_replayed == 7
    assert "build-app" in render_for_agent(r) and "1 of them pass today" in render_for_agent(r)


def test_rewrite_input(repo, round_dir):
    c = _mw(repo, "    def before_tool(self, ctx, call):\n"
                  "        if call.arguments.get('command', '').startswith('python3'):\n"
                  "            return HookResult(replace_tool_input={**call.arguments, 'timeout': 600})\n")
    r = replay_change(repo, c, round_dir)
    assert _firsts(r) == {"parse-logs": "corpus/parse-logs/trial-1/step-004.md",
                          "serve-api": "corpus/serve-api/trial-1/step-003.md"}
    assert r.at_risk == ["parse-logs"]  # serve-api fails today: it cannot regress
    assert r.tasks[0].first.reasons[0].startswith("input of run_shell_command rewritten to")


def test_rewrite_output(repo, round_dir):
    c = _mw(repo, "    def after_tool(self, ctx, call, result):\n"
                  "        if len(result.content) > 1000:\n"
                  "            return HookResult(replace_tool_output=result.content[:1000] + ' [cut]')\n")
    r = replay_change(repo, c, round_dir)
    assert _firsts(r) == {"parse-logs": "corpus/parse-logs/trial-1/step-003.md"}
    assert [t.steps_differing for t in r.tasks[0].trials] == [1, 1]
    assert r.tasks[0].first.reasons[0].startswith("output of run_shell_command rewritten")


def test_injected_note(repo, round_dir):
    c = _mw(repo, "    def after_tool(self, ctx, call, result):\n"
                  "        if result.content.startswith('exit code: 1'):\n"
                  "            return HookResult(add_message='the last command failed; read its error first')\n")
    r = replay_change(repo, c, round_dir)
    assert _firsts(r) == {"parse-logs": "corpus/parse-logs/trial-2/step-004.md"}
    assert r.tasks[0].first.reasons == ["note injected: the last command failed; read its error first"]
    assert r.at_risk == ["parse-logs"] and [t.trial for t in r.tasks[0].trials] == ["trial-2"]


def test_early_stop(repo, round_dir):
    c = _mw(repo, "    def after_tool(self, ctx, call, result):\n"
                  "        if 'Traceback' in result.content:\n"
                  "            return HookResult(stop='a crash: giving up')\n")
    r = replay_change(repo, c, round_dir)
    assert _firsts(r) == {"parse-logs": "corpus/parse-logs/trial-2/step-004.md"}
    trial = r.tasks[0].trials[0]
    assert trial.first.reasons == ["session stopped: a crash: giving up"]
    assert trial.steps_differing == 2  # step-004 stops, step-005 never happens


def test_schema_rejection(repo, round_dir):
    desc = (repo / "tool_descriptions" / "run_shell_command.tool.yaml").read_text()
    start = desc.index("    background:")
    new = desc[:start] + desc[desc.index("  required:"):]
    c = commit_change(repo, {"tool_descriptions/run_shell_command.tool.yaml": new})
    r = replay_change(repo, c, round_dir)
    assert r.kinds == ["tool_schema"] and r.not_replayed == []
    assert _firsts(r) == {"serve-api": "corpus/serve-api/trial-1/step-003.md"}
    reason = r.tasks[0].first.reasons[0]
    assert reason.startswith("arguments of run_shell_command rejected by the new schema") and "background" in reason


def test_text_only_change_is_not_replayable(repo, round_dir):
    c = commit_change(repo, {"LongTermMEMORY.md": "- Always run the tests twice.\n"})
    r = replay_change(repo, c, round_dir)
    assert not r.replayable and r.tasks == [] and r.not_replayed == ["LongTermMEMORY.md"]
    assert "not replayable" in r.reason and "not replayable" in render_for_agent(r)


def test_change_that_touches_nothing_raises_no_alarm(repo, round_dir):
    c = _mw(repo, "    def before_tool(self, ctx, call):\n"
                  "        if 'docker' in call.arguments.get('command', ''):\n"
                  "            return HookResult(deny='no docker here')\n")
    r = replay_change(repo, c, round_dir)
    assert r.replayable and r.tasks == [] and r.at_risk == [] and r.middleware_errors == []
    assert "alters no recorded step" in render_for_agent(r)


def test_raising_middleware_is_reported_not_fatal(repo, round_dir):
    c = _mw(repo, "    def before_tool(self, ctx, call):\n        raise ValueError('boom')\n")
    r = replay_change(repo, c, round_dir)
    assert r.tasks == [] and r.errors == []  # the runtime goes on as if the hook returned None
    [m] = r.middleware_errors
    assert (m.middleware, m.hook, m.count) == ("M", "before_tool", 13)
    assert "ValueError: boom" in m.error and m.ref == "corpus/build-app/trial-1/step-003.md"


def test_middleware_that_kills_the_process_is_contained(repo, round_dir):
    c = _mw(repo, "    def before_tool(self, ctx, call):\n        import os\n        os._exit(3)\n")
    r = replay_change_isolated(repo, c, round_dir, change_id="chg-9")
    assert not r.replayable and r.change_id == "chg-9"
    assert "exit 3" in r.reason


def test_replay_touches_neither_the_run_nor_the_workspace(repo, round_dir):
    c = _mw(repo, "    def after_tool(self, ctx, call, result):\n        return HookResult(add_message='x')\n")
    (repo / "scratch.txt").write_text("uncommitted")  # the live work tree as the agent left it
    status = git(repo, "status", "--porcelain")  # (git status refreshes the index: before the snapshot)
    before = snapshot(round_dir.parent.parent, repo)
    r = replay_change(repo, c, round_dir)
    assert r.tasks  # it did replay
    assert snapshot(round_dir.parent.parent, repo) == before
    assert git(repo, "status", "--porcelain") == status


def test_workspace_that_does_not_load_is_reported(repo, round_dir):
    c = commit_change(repo, with_middleware(repo, "m", "M", "this is not python\n"))
    r = replay_change(repo, c, round_dir)
    assert not r.replayable and "does not load" in r.reason and "middleware/m.py" in r.reason


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_reexecuted_tool_implementation(repo, tmp_path):
    """A lower default timeout in the shell tool: re-running the recorded commands shows which task needs more."""
    tasks = tmp_path / "tasks"
    for name in ("slow-build", "quick-check"):
        (tasks / name / "environment").mkdir(parents=True)
        (tasks / name / "task.toml").write_text(f'[task]\nname = "{name}"\n')
        (tasks / name / "instruction.md").write_text("Do it.\n")
        (tasks / name / "tests").mkdir()
        (tasks / name / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    it = tmp_path / "run" / "iterations" / "001"
    write_trial(it, "slow-build", 1, True, [[shell("echo start", "exit code: 0\nstart\n")],
                                            [shell("sleep 2 && echo built", "exit code: 0\nbuilt\n")]])
    write_trial(it, "quick-check", 1, True, [[shell("echo ok", "exit code: 0\nok\n")]])
    code = (repo / "tools" / "shell.py").read_text().replace("timeout: int = 120", "timeout: int = 1")
    c = commit_change(repo, {"tools/shell.py": code})
    r = replay_change(repo, c, it, tasks_dir=tasks, settings=ReplaySettings(reexec_max_trials=4))
    assert r.kinds == ["tool_implementation"]
    assert r.reexec["trials"] == 2
    assert _firsts(r) == {"slow-build": "corpus/slow-build/trial-1/step-004.md"}
    assert "differs when re-executed: timed out after 1s" in r.tasks[0].first.reasons[0]
    off = replay_change(repo, c, it, tasks_dir=tasks, settings=ReplaySettings(reexec=False))
    assert off.tasks == [] and "turned off" in off.reexec["skipped"]


def test_model_hooks_and_turn_limit(repo, round_dir):
    """before_model sees the recorded conversation; a lower max_turns stops sessions early."""
    c = _mw(repo, "    def before_model(self, ctx, messages):\n"
                  "        if any('Traceback' in str(m.get('content')) for m in messages):\n"
                  "            return HookResult(add_message='a command crashed: read the traceback first')\n")
    r = replay_change(repo, c, round_dir)
    assert _firsts(r) == {"parse-logs": "corpus/parse-logs/trial-2/step-005.md"}  # the turn after the crash
    assert r.tasks[0].first.reasons == ["note injected: a command crashed: read the traceback first"]
    agent = (repo / "agent.yaml").read_text().replace("max_turns: 100", "max_turns: 2")
    r = replay_change(repo, commit_change(repo, {"agent.yaml": agent}), round_dir)
    assert r.kinds == ["limits"]
    assert _firsts(r) == {"build-app": "corpus/build-app/trial-1/step-005.md",
                          "parse-logs": "corpus/parse-logs/trial-1/step-005.md",
                          "serve-api": "corpus/serve-api/trial-1/step-005.md"}
    assert r.tasks[0].first.reasons == ["session stopped: max_turns=2 reached"]
