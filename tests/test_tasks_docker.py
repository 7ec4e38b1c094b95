"""`ahe tasks check` and the trial phases on the docker backend, against a real engine.

The engine and the offline busybox+bash base image come from `tests/docker_support.py`;
the tasks here build `FROM` that image, as a Terminal-Bench task builds from its Dockerfile.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from docker_support import base_image, docker_engine  # noqa: F401 - fixtures

from ahe.tasks import load_task, run_oracle, run_setup, run_verifier
from ahe.tasks.check import check_tasks
from ahe.tasks.sandboxes import docker_sandbox_factory

pytestmark = pytest.mark.docker


def docker_task(root: Path, name: str, base: str, *, leak: bool = False) -> Path:
    folder = root / name
    files = {
        "task.toml": """\
            version = "1.0"
            [metadata]
            difficulty = "easy"
            category = "fixture"
            [agent]
            timeout_sec = 60
            [verifier]
            timeout_sec = 60
            [environment]
            build_timeout_sec = 300
            cpus = 1
            memory = "512M"
            """,
        "instruction.md": "Write the number of lines of /app/input.txt to /app/count.txt.\n",
        "environment/Dockerfile": f"FROM {base}\nWORKDIR /app\nCOPY input.txt /app/input.txt\n"
        + ("COPY check-copy.sh /opt/check-copy.sh\nCOPY check-copy.sh /app/.check.sh\n"
           if leak else ""),
        "environment/input.txt": "a\nb\nc\n",
        "tests/test.sh": """\
            #!/bin/bash
            # Verifier of the docker fixture: three lines were expected in the input file.
            mkdir -p /logs/verifier
            if [ "$(cat /app/count.txt 2>/dev/null)" = "3" ]; then
              echo '{"reward": 1}' > /logs/verifier/reward.json
            else
              echo '{"reward": 0}' > /logs/verifier/reward.json
            fi
            """,
        "solution/solve.sh": "wc -l < /app/input.txt | tr -d ' ' > /app/count.txt\n",
    }
    for rel, text in files.items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    if leak:
        copy = (folder / "tests" / "test.sh").read_text()
        (folder / "environment" / "check-copy.sh").write_text(copy)
    return folder


async def test_phases_in_a_container(tmp_path: Path, docker_engine: Any, base_image: str) -> None:  # noqa: F811
    task = load_task(docker_task(tmp_path, "count-lines", base_image))
    assert task.runs_on == "docker" and task.environment.memory_mb == 512
    sandbox = docker_sandbox_factory(client=docker_engine)(task, tmp_path / "w")
    await sandbox.start()
    try:
        assert await run_setup(task, sandbox) is None  # docker tasks build, they do not set up
        probe = await sandbox.exec("test -e /tests && echo yes || echo no", timeout=30)
        assert probe.stdout.strip() == "no"
        before = await run_verifier(task, sandbox, tmp_path / "v0")
        solved = await run_oracle(task, sandbox)
        after = await run_verifier(task, sandbox, tmp_path / "v1")
    finally:
        await sandbox.stop()
    assert before.reward == 0.0 and not before.passed
    assert solved.exit_code == 0, solved.stderr
    assert after.passed and after.reward_file == "reward.json"
    assert (tmp_path / "v1" / "reward.json").is_file()


async def test_check_with_the_docker_factory(
    tmp_path: Path, docker_engine: Any, base_image: str  # noqa: F811
) -> None:
    tasks = [
        load_task(docker_task(tmp_path / "tasks", "good", base_image)),
        load_task(docker_task(tmp_path / "tasks", "leaky", base_image, leak=True)),
    ]
    report = await check_tasks(
        tasks, {"docker": docker_sandbox_factory(client=docker_engine)},
        concurrency=4, work_dir=tmp_path / "work",
    )
    rows = {t.name: t for t in report.tasks}
    good, leaky = rows["good"], rows["leaky"]
    assert good.ok, good
    assert (good.oracle.status, good.nop.status, good.leak.status) == ("ok", "ok", "ok")
    assert leaky.leak.status == "fail"
    assert "tests/test.sh is copied at /app/.check.sh" in leaky.leak.detail
    assert not report.ok


def test_cli_check_sandbox_docker(tmp_path: Path, docker_engine: Any, base_image: str) -> None:  # noqa: F811
    import json

    from typer.testing import CliRunner

    from ahe.tasks.cli import app

    docker_task(tmp_path / "tasks", "good", base_image)
    skipped = CliRunner().invoke(app, ["check", str(tmp_path / "tasks"), "--json"])
    assert skipped.exit_code == 0
    assert json.loads(skipped.stdout)["summary"]["skipped"] == 1

    result = CliRunner().invoke(
        app, ["check", str(tmp_path / "tasks"), "--sandbox", "docker", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] and data["summary"]["passed"] == 1
    assert data["tasks"][0]["oracle"]["reward"] == 1.0
