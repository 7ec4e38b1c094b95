"""`ahe tasks check` / `ahe tasks list` on tiny fixture tasks, in real bubblewrap sandboxes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ahe.tasks import Task, load_task, load_tasks
from ahe.tasks.check import CheckReport, check_tasks
from ahe.tasks.sandboxes import make_local_sandbox
from ahe.tasks.cli import app
from ahe.tasks.leaks import distinctive_lines, probe_host_paths, shared_test_files

FIXTURES = Path(__file__).parent / "fixtures" / "tasks"
CHECK = FIXTURES / "check"
runner = CliRunner()


def _bwrap_ok() -> bool:
    from ahe.sandbox.local import LocalSandbox

    return LocalSandbox.available()[0]


needs_bwrap = pytest.mark.skipif(not _bwrap_ok(), reason="bubblewrap cannot start a jail here")


def copy_fixture(tmp_path: Path, name: str, new_name: str | None = None) -> Path:
    dst = tmp_path / "tasks" / (new_name or name)
    shutil.copytree(CHECK / name, dst)
    return dst


def by_name(report: CheckReport) -> dict:
    return {t.name: t for t in report.tasks}


# ---- the audit, called as a function ----------------------------------------------------


@needs_bwrap
async def test_check_fixture_tasks(tmp_path: Path) -> None:
    loaded = load_tasks(CHECK)
    report = await check_tasks(loaded.tasks, concurrency=4, work_dir=tmp_path / "work")
    rows = by_name(report)
    assert set(rows) == {"good-task", "leaky-env", "nop-passes", "oracle-fails"}

    good = rows["good-task"]
    assert good.ok
    assert {k: v.status for k, v in good.items.items()} == {
        "load": "ok", "oracle": "ok", "nop": "ok", "leak": "ok"}
    assert good.oracle.reward == 1.0 and good.nop.reward == 0.0

    nop = rows["nop-passes"]
    assert not nop.ok and nop.nop.status == "fail" and "do-nothing agent passes" in nop.nop.detail
    assert nop.oracle.status == "ok"

    bad_oracle = rows["oracle-fails"]
    assert not bad_oracle.ok and bad_oracle.oracle.status == "fail"
    assert "reward 0" in bad_oracle.oracle.detail and bad_oracle.nop.status == "ok"

    leaky = rows["leaky-env"]
    assert not leaky.ok and leaky.leak.status == "fail"
    assert "tests/test.sh is copied at /app/.cache/verify.sh" in leaky.leak.detail

    assert not report.ok
    assert report.counts() == {"total": 4, "passed": 1, "failed": 3, "skipped": 0}
    # the verifier's record of each sandbox is kept under work_dir
    assert (tmp_path / "work" / "good-task" / "oracle" / "verifier" / "reward.txt").is_file()


@needs_bwrap
async def test_leak_of_a_single_line_is_caught(tmp_path: Path) -> None:
    folder = copy_fixture(tmp_path, "good-task", "line-leak")
    (folder / "environment" / "NOTES.md").write_text(
        "Hint from the author:\n    expected_total_for_the_sum_fixture=22\n"
    )
    report = await check_tasks([load_task(folder)], work_dir=tmp_path / "work")
    leak = report.tasks[0].leak
    assert leak.status == "fail" and "/app/NOTES.md" in leak.detail


@needs_bwrap
async def test_files_shared_on_purpose_are_a_warning(tmp_path: Path) -> None:
    folder = copy_fixture(tmp_path, "good-task", "shared")
    (folder / "tests" / "numbers.orig").write_text("3\n4\n5\n" * 20)
    (folder / "environment" / "numbers.txt").write_text("3\n4\n5\n" * 20)
    (folder / "tests" / "test.sh").write_text(
        (folder / "tests" / "test.sh").read_text().replace("=22", "=" + str(12 * 20 + 10))
    )
    task = load_task(folder)
    assert shared_test_files(task) == {"tests/numbers.orig": "environment/numbers.txt"}
    report = await check_tasks([task], work_dir=tmp_path / "work")
    row = report.tasks[0]
    assert row.leak.status == "warn" and "tests/numbers.orig is also given" in row.leak.detail
    assert row.ok and report.ok


async def test_host_paths_reachable_are_leaks(tmp_path: Path) -> None:
    """Without isolation the host task folder is visible: the probe must say so."""
    task = load_task(CHECK / "good-task")
    sandbox = make_local_sandbox(task, tmp_path / "w", isolation="none")
    with pytest.warns(RuntimeWarning):
        await sandbox.start()
    try:
        leaks = await probe_host_paths(task, sandbox)
    finally:
        await sandbox.stop()
    assert f"host path {task.path} is reachable inside the sandbox" in leaks
    assert any(str(task.test_script) in leak for leak in leaks)


@needs_bwrap
async def test_setup_failure_and_missing_solution_and_empty_instruction(tmp_path: Path) -> None:
    broken_setup = copy_fixture(tmp_path, "good-task", "broken-setup")
    (broken_setup / "environment" / "setup.sh").write_text("echo 'cannot fetch' >&2\nexit 2\n")
    no_solution = copy_fixture(tmp_path, "good-task", "no-solution")
    shutil.rmtree(no_solution / "solution")
    empty = copy_fixture(tmp_path, "good-task", "empty-instruction")
    (empty / "instruction.md").write_text("  \n")

    loaded = load_tasks(tmp_path / "tasks")
    rows = by_name(await check_tasks(loaded.tasks, work_dir=tmp_path / "work"))

    setup = rows["broken-setup"]
    assert setup.oracle.status == "error" and "TaskSetupError" in setup.oracle.detail
    assert "cannot fetch" in setup.oracle.detail
    assert setup.nop.status == setup.leak.status == "error" and not setup.ok

    missing = rows["no-solution"]
    assert missing.oracle.status == "fail" and "no solution/solve.sh" in missing.oracle.detail
    assert missing.nop.status == "ok"

    assert rows["empty-instruction"].load.status == "fail"
    assert "instruction.md is empty" in rows["empty-instruction"].load.detail


async def test_docker_tasks_are_skipped_without_a_docker_factory() -> None:
    loaded = load_tasks(FIXTURES)
    report = await check_tasks(loaded.tasks)
    assert {t.name for t in report.tasks} == {"tb2-style-task", "harbor-dockerfile-task"}
    for row in report.tasks:
        assert row.skipped and row.ok
        assert row.oracle.detail == "skipped (needs --sandbox docker)"
    assert report.ok and report.counts()["skipped"] == 2


@needs_bwrap
async def test_a_docker_factory_plugs_in(tmp_path: Path) -> None:
    """Any callable (task, workdir) -> Sandbox serves docker tasks; here a stand-in that
    runs the Harbor fixture (plain bash, /app from nothing) in a local sandbox."""
    seen: list[str] = []

    def fake_docker(task: Task, workdir: Path):
        seen.append(task.name)
        return make_local_sandbox(task, workdir)

    task = load_task(FIXTURES / "harbor-dockerfile-task")
    report = await check_tasks([task], {"docker": fake_docker}, work_dir=tmp_path / "w")
    row = report.tasks[0]
    assert seen == [task.name, task.name]  # one sandbox for the oracle, one for nop + leak
    assert row.oracle.status == "ok" and row.oracle.reward == 1.0  # reward.json + [solution.env]
    assert row.nop.status == "ok" and row.leak.status == "ok" and report.ok


def test_distinctive_lines_skip_boilerplate() -> None:
    task = load_task(CHECK / "good-task")
    lines = distinctive_lines(task)
    assert lines and all("reward.txt" not in line and not line.startswith("#") for line in lines)
    assert any("expected_total_for_the_sum_fixture" in line for line in lines)


# ---- the command line ------------------------------------------------------------------


@needs_bwrap
def test_cli_check_good_task_exits_zero() -> None:
    result = runner.invoke(app, ["check", str(CHECK), "--task", "good-task"])
    assert result.exit_code == 0, result.output
    assert "good-task" in result.output and "1 passed, 0 failed" in result.output
    assert "nop-passes" not in result.output


@needs_bwrap
def test_cli_check_json_and_failing_exit_code() -> None:
    result = runner.invoke(app, ["check", str(CHECK), "--json", "-j", "4"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["ok"] is False
    assert data["summary"] == {"total": 4, "passed": 1, "failed": 3, "skipped": 0}
    rows = {t["name"]: t for t in data["tasks"]}
    assert rows["good-task"]["ok"] is True
    assert rows["nop-passes"]["nop"]["status"] == "fail"
    assert rows["oracle-fails"]["oracle"]["status"] == "fail"
    assert rows["leaky-env"]["leak"]["status"] == "fail"
    for row in rows.values():
        assert set(row) >= {"load", "oracle", "nop", "leak", "duration_sec", "ok", "runs_on"}


def test_cli_check_reports_docker_tasks_as_skipped() -> None:
    result = runner.invoke(app, ["check", str(FIXTURES)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert result.output.count("skipped (needs --sandbox docker)") >= 2


def test_cli_check_broken_task_fails(tmp_path: Path) -> None:
    folder = tmp_path / "tasks" / "broken"
    folder.mkdir(parents=True)
    (folder / "task.toml").write_text("[agent]\ntimeout_sec = 'x'\n")
    (folder / "instruction.md").write_text("x")
    result = runner.invoke(app, ["check", str(tmp_path / "tasks"), "--json"])
    assert result.exit_code == 1
    row = json.loads(result.stdout)["tasks"][0]
    assert row["load"]["status"] == "fail" and "[agent] timeout_sec" in row["load"]["detail"]


def test_cli_unknown_task_pattern_is_a_clear_error() -> None:
    result = runner.invoke(app, ["check", str(CHECK), "--task", "no-such-*"])
    assert result.exit_code == 2
    assert "--task no-such-* matches no task" in result.output


def test_cli_missing_dir_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["list", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "does not exist" in result.output
    assert "Traceback" not in result.output


def test_cli_unknown_sandbox(tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", str(CHECK), "--sandbox", "cloud"])
    assert result.exit_code == 2 and "--sandbox 'cloud'" in result.output


def test_cli_list_table_and_json(tmp_path: Path) -> None:
    result = runner.invoke(app, ["list", str(FIXTURES)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "tb2-style-task" in result.output and "harbor-dockerfile-task" in result.output
    assert "docker" in result.output

    result = runner.invoke(app, ["list", str(CHECK), "--json", "--task", "good-*"])
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert [t["name"] for t in data["tasks"]] == ["good-task"] and data["errors"] == []
    assert data["tasks"][0]["runs_on"] == "local" and data["tasks"][0]["has_setup"] is True


def test_cli_list_reports_broken_tasks(tmp_path: Path) -> None:
    shutil.copytree(CHECK / "good-task", tmp_path / "good")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "task.toml").write_text("[environment\n")
    (tmp_path / "bad" / "instruction.md").write_text("x")
    result = runner.invoke(app, ["list", str(tmp_path), "--json"])
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [t["name"] for t in data["tasks"]] == ["good"]
    assert data["errors"][0]["name"] == "bad" and "not valid TOML" in data["errors"][0]["message"]
