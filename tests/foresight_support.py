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
