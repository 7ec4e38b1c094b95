"""A run in which no task can run under the chosen sandbox stops with one sentence, never an empty 0.000 table."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "tasks"
SEED = REPO / "harness_workspace"
POLICY = "rules:\n  - reply: done\n"


def eval_cli(tmp_path: Path, tasks: Path, *extra: str) -> subprocess.CompletedProcess:
    (tmp_path / "policy.yaml").write_text(POLICY)
    cmd = [sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(SEED), "--tasks", str(tasks), "-k", "1",
           "--mock-policy", str(tmp_path / "policy.yaml"), "--out", str(tmp_path / "out"), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_docker_only_tasks_under_the_local_sandbox_stop_with_one_sentence(tmp_path):
    tasks = tmp_path / "tasks"
    for name in ("tb2-style-task", "harbor-dockerfile-task"):
        shutil.copytree(FIXTURES / name, tasks / name)
    proc = eval_cli(tmp_path, tasks)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "pass@1" not in proc.stdout
    assert "no task can run under the local sandbox: 2 need Docker (run with --sandbox docker)" in proc.stderr
    assert "broken" not in proc.stderr
    assert not (tmp_path / "out" / "results.json").exists()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_docker_tasks_beside_local_ones_are_reported_as_needing_docker(tmp_path):
    tasks = tmp_path / "tasks"
    shutil.copytree(FIXTURES / "harbor-dockerfile-task", tasks / "harbor-dockerfile-task")
    shutil.copytree(REPO / "examples" / "tasks" / sorted(p.name for p in (REPO / "examples" / "tasks").iterdir()
                                                        if (p / "task.toml").exists())[0], tasks / "local-one")
    proc = eval_cli(tmp_path, tasks, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "need Docker (run with --sandbox docker):" in proc.stderr and "harbor-dockerfile-task" in proc.stderr
    assert "broken" not in proc.stderr
