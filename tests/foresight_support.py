"""Recorded rounds and harness repositories for the foresight tests and the benchmark.

Trajectories are written with the runtime's own `TrajectoryWriter` and `agent_step`, so they
have exactly the format a real trial leaves on disk.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ahe.llm.types import ModelResponse, ToolCall
from ahe.runtime.trace import TrajectoryWriter, agent_step

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "harness_workspace"

Call = tuple[str, dict[str, Any], str]  # (tool, arguments, observation)


def shell(command: str, output: str = "exit code: 0\n", **extra: Any) -> Call:
    return ("run_shell_command", {"command": command, **extra}, output)


def write_trial(iteration_dir: Path, task: str, trial: int, passed: bool, turns: list[list[Call]],
                final: str = "Done.") -> Path:
    """One recorded trial: each turn is a model reply with these tool calls; a last reply ends it."""
    folder = iteration_dir / "rollouts" / task / f"trial-{trial}"
    w = TrajectoryWriter(folder / "trajectory.json", session_id=f"{task}-{trial}", agent={"name": "code-agent"})
    w.add_step({"source": "system", "message": "You are a software engineer."})
    w.add_step({"source": "user", "message": f"Solve {task}."})
    for t, calls in enumerate(turns):
        tcs = [ToolCall(id=f"c{t}_{i}", name=n, arguments=a, raw_arguments=json.dumps(a)) for i, (n, a, _) in enumerate(calls)]
        w.add_step(agent_step(ModelResponse(content="", tool_calls=tcs, model="mock")))
        w.update_last_step(observation={"results": [
            {"source_call_id": tc.id, "content": out, "extra": {"tool": tc.name, "is_error": False}}
            for tc, (_, _, out) in zip(tcs, calls)]})
    w.add_step(agent_step(ModelResponse(content=final, model="mock")))
    w.finish(final_metrics={}, extra={})
    (folder / "result.json").write_text(json.dumps({"task": task, "trial": trial, "passed": passed,
                                                    "reward": 1.0 if passed else 0.0}))
    return folder


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def harness_repo(path: Path) -> Path:
    """A git repository holding the seed harness, one commit."""
    shutil.copytree(SEED, path)
    git(path, "init", "-q")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "t")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "seed")
    return path


def commit_change(repo: Path, files: dict[str, str], message: str = "change") -> str:
    """Write `files` (path -> text) into the harness and commit them; returns the commit."""
    for rel, text in files.items():
        p = repo / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def with_middleware(repo: Path, module: str, cls: str, code: str, params: dict | None = None) -> dict[str, str]:
    """The files of a change that adds middleware `middleware/<module>.py:<cls>` to agent.yaml."""
    agent = (repo / "agent.yaml").read_text()
    entry = f'middleware:\n  - binding: "middleware.{module}:{cls}"\n'
    if params:
        entry += f"    params: {json.dumps(params)}\n"
    return {f"middleware/{module}.py": code, "agent.yaml": agent.replace("middleware: []\n", entry)}


def snapshot(*roots: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every file below the roots (a .git folder included)."""
    out = {}
    for root in roots:
        for p in sorted(root.rglob("*")):
            if p.is_file():
                st = p.stat()
                out[str(p)] = (st.st_size, st.st_mtime_ns)
    return out


# ---------------------------------------------------------------------------------------------
# The scripted scenario set: a recorded round and five changes with known regressions.
# ---------------------------------------------------------------------------------------------
SCENARIO_TASKS = {  # task -> (passes today, recorded turns)
    "repo-cleanup": (True, [[shell("git status --short", "exit code: 0\n")], [shell("git stash && git clean -fd", "exit code: 0\n")]]),
    "hotfix-branch": (True, [[shell("git stash", "exit code: 0\n")], [shell("git checkout -b hotfix", "exit code: 0\n")]]),
    "slow-build": (True, [[shell("ls", "exit code: 0\n")], [shell("sleep 2 && echo built", "exit code: 0\nbuilt\n")]]),
    "serve-api": (True, [[shell("echo serving", "started in the background", background=True)],
                         [shell("echo ok", "exit code: 0\nok\n")]]),
    "parse-logs": (True, [[shell("grep -c ERROR /dev/null || true", "exit code: 0\n0\n")]]),
    "report-totals": (False, [[shell("cat /app/data.csv", "exit code: 1\ncat: /app/data.csv: No such file\n")]]),
}
NO_STASH = ("from ahe.runtime import HookResult, Middleware\n\n\nclass NoStash(Middleware):\n"
            "    def before_tool(self, ctx, call):\n"
            "        if 'git stash' in (call.arguments or {}).get('command', ''):\n"
            "            return HookResult(deny='git stash hides work; commit instead')\n")
NO_DOCKER = NO_STASH.replace("NoStash", "NoDocker").replace("git stash", "docker run")


def scenario_round(root: Path) -> tuple[Path, Path]:
    """(iteration folder with the recorded round, the task folders) for SCENARIO_TASKS, k=2."""
    it = root / "run" / "iterations" / "001"
    tasks = root / "tasks"
    for name, (passed, turns) in SCENARIO_TASKS.items():
        for n in (1, 2):
            write_trial(it, name, n, passed, turns)
        for rel, text in {"task.toml": f'[task]\nname = "{name}"\n', "instruction.md": "Do the task.\n",
                          "tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"}.items():
            (tasks / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (tasks / name / rel).write_text(text)
        (tasks / name / "environment").mkdir(exist_ok=True)
    return it, tasks


def scenario_changes(repo: Path) -> list[dict[str, Any]]:
    """Five changes committed one after another: id, component, commit, the agent's (scripted,
    regression-blind) predictions and the regressions each truly causes."""
    out = []

    def add(cid: str, component: str, files: dict[str, str], predicted: list[str], truth: list[str]) -> None:
        out.append({"id": cid, "component": component, "commit": commit_change(repo, files, cid),
                    "predicted_regressions": predicted, "truth": truth})

    add("chg-1", "middleware", with_middleware(repo, "no_stash", "NoStash", NO_STASH), ["parse-logs"],
        ["repo-cleanup", "hotfix-branch"])
    shell_py = (repo / "tools" / "shell.py").read_text().replace("timeout: int = 120", "timeout: int = 1")
    add("chg-2", "tool_implementation", {"tools/shell.py": shell_py}, ["slow-build"], ["slow-build"])
    desc = (repo / "tool_descriptions" / "run_shell_command.tool.yaml").read_text()
    desc = desc[:desc.index("    background:")] + desc[desc.index("  required:"):]
    add("chg-3", "tool_description", {"tool_descriptions/run_shell_command.tool.yaml": desc}, [], ["serve-api"])
    agent = (repo / "agent.yaml").read_text().replace(
        '  - binding: "middleware.no_stash:NoStash"\n',
        '  - binding: "middleware.no_stash:NoStash"\n  - binding: "middleware.no_docker:NoDocker"\n')
    add("chg-4", "middleware", {"middleware/no_docker.py": NO_DOCKER, "agent.yaml": agent}, [], [])
    add("chg-5", "long_term_memory", {"LongTermMEMORY.md": "- Read the task twice.\n"}, [], [])
    return out


def measure_scenarios(root: Path, *, reexec: bool = True) -> dict[str, Any]:
    """Replay each scenario change, then score regression predictions as attribution does."""
    from ahe.harness.manifest import ChangeEntry
    from ahe.evolution.attribution import attribute
    from evolve_agent.replay import ReplaySettings, replay_change, summarize

    it, tasks = scenario_round(root)
    repo = harness_repo(root / "workspace")
    changes = scenario_changes(repo)
    entries, reports = [], {}
    settings = ReplaySettings(reexec=reexec, reexec_max_trials=12)
    for c in changes:
        r = replay_change(repo, c["commit"], it, change_id=c["id"], settings=settings, tasks_dir=tasks)
        reports[c["id"]] = r
        entries.append(ChangeEntry(id=c["id"], component=c["component"], files=["x"], summary="scenario change",
                                   root_cause="scripted", targeted_fix="scripted", commit=c["commit"],
                                   predicted_regressions=c["predicted_regressions"], replay_at_risk=r.at_risk,
                                   replay=summarize(r), status="accepted"))
    truth = {t for c in changes for t in c["truth"]}
    before = {t: 1.0 if p else 0.0 for t, (p, _) in SCENARIO_TASKS.items()}
    after = {t: 0.0 if t in truth else v for t, v in before.items()}
    att = attribute(entries, before, after, iteration=2)
    return {"changes": changes, "reports": reports, "attribution": att}
