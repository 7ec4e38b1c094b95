"""Trial phases on a real LocalSandbox (bubblewrap): app dir, setup, oracle, verifier, rewards."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from ahe.errors import InfrastructureError
from ahe.tasks import (
    Task,
    TaskSetupError,
    load_task,
    parse_reward,
    prepare_app_dir,
    run_oracle,
    run_setup,
    run_verifier,
)
from ahe.tasks.phases import RewardParseError

FIXTURES = Path(__file__).parent / "fixtures" / "tasks"


def _bwrap_ok() -> bool:
    try:
        from ahe.sandbox.local import LocalSandbox
    except ImportError:
        return False
    return LocalSandbox.available()[0]


needs_bwrap = pytest.mark.skipif(not _bwrap_ok(), reason="bubblewrap cannot start a jail here")


def write_task(root: Path, name: str, *, test_sh: str, toml: str = "", solve_sh: str | None = None,
               setup_sh: str | None = None, env_files: dict[str, str] | None = None) -> Task:
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(textwrap.dedent(toml))
    (folder / "instruction.md").write_text("Do it.\n")
    (folder / "tests" / "test.sh").write_text(textwrap.dedent(test_sh))
    if solve_sh is not None:
        (folder / "solution").mkdir()
        (folder / "solution" / "solve.sh").write_text(textwrap.dedent(solve_sh))
    files = dict(env_files or {})
    if setup_sh is not None:
        files["setup.sh"] = setup_sh
    for rel, text in files.items():
        p = folder / "environment" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return load_task(folder)


@pytest.fixture
def sandbox_for(tmp_path: Path):
    """Start a real LocalSandbox for a task (the same way `ahe tasks check` does)."""
    from ahe.tasks.sandboxes import make_local_sandbox

    count = {"n": 0}

    async def make(task: Task, *, isolation: str = "bwrap"):
        workdir = tmp_path / f"trial-{count['n']}"
        count["n"] += 1
        sb = make_local_sandbox(task, workdir, isolation=isolation)
        await sb.start()
        return sb  # each test stops it in a finally block

    return make


# ---- host side -----------------------------------------------------------------------------


def test_prepare_app_dir_copies_environment_without_build_files(tmp_path: Path) -> None:
    task = write_task(
        tmp_path, "t", test_sh="true\n", setup_sh="echo setup\n",
        env_files={"data/a.txt": "A\n", "run.sh": "echo run\n", "sub/setup.sh": "nested\n"},
    )
    (task.environment_dir / "run.sh").chmod(0o755)
    app = prepare_app_dir(task, tmp_path / "app")
    files = sorted(str(p.relative_to(app)) for p in app.rglob("*") if p.is_file())
    assert files == ["data/a.txt", "run.sh", "sub/setup.sh"]  # only the top-level setup.sh goes
    assert (app / "run.sh").stat().st_mode & 0o111


def test_prepare_app_dir_for_docker_task_only_makes_the_folder(tmp_path: Path) -> None:
    task = load_task(FIXTURES / "tb2-style-task")
    app = prepare_app_dir(task, tmp_path / "app")
    assert app.is_dir() and list(app.iterdir()) == []


def test_prepare_app_dir_without_environment(tmp_path: Path) -> None:
    task = write_task(tmp_path, "t", test_sh="true\n")
    assert list(prepare_app_dir(task, tmp_path / "app").iterdir()) == []


# ---- reward parsing (pure) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "files, reward, used",
    [
        ({"reward.txt": b"1"}, 1.0, "reward.txt"),
        ({"reward.txt": b"  0.25\n"}, 0.25, "reward.txt"),
        ({"reward.txt": b"-1"}, -1.0, "reward.txt"),
        ({"reward.json": b'{"reward": 0.5, "tests_passed": 3}'}, 0.5, "reward.json"),
        ({"reward.json": b'{"accuracy": 0.75}'}, 0.75, "reward.json"),
        ({"reward.json": b'{"a": 1, "b": 0, "note": "x"}', "reward.txt": b"1"}, 1.0, "reward.json"),
        ({"reward.json": b'{"reward": 1, "failed": ["t1"], "ok": true}'}, 1.0, "reward.json"),
        ({"reward.json": b'{"reward": 0}', "reward.txt": b"1"}, 0.0, "reward.json"),
    ],
)
def test_parse_reward(files: dict, reward: float, used: str) -> None:
    got, rewards, which = parse_reward(files)
    assert (got, which) == (reward, used)
    assert rewards.get("reward", got) == got


@pytest.mark.parametrize(
    "files, why",
    [
        ({}, "neither"),
        ({"reward.txt": b""}, "empty"),
        ({"reward.txt": b"   \n"}, "empty"),
        ({"reward.txt": b"pass"}, "one number"),
        ({"reward.txt": b"1\n1"}, "one number"),
        ({"reward.txt": b"nan"}, "finite"),
        ({"reward.txt": b"inf"}, "finite"),
        ({"reward.json": b""}, "empty"),
        ({"reward.json": b"{not json"}, "valid JSON"),
        ({"reward.json": b"[1]"}, "object"),
        ({"reward.json": b'{"reward": NaN}'}, "non-finite"),
        ({"reward.json": b'{"a": 1, "b": 2}'}, "ambiguous"),
        ({"reward.json": b'{"note": "x", "ok": true}'}, "no numeric"),
        ({"reward.json": b'{"a": 1, "b": 2}', "reward.txt": b"bad"}, "one number"),
    ],
)
def test_parse_reward_errors(files: dict, why: str) -> None:
    with pytest.raises(RewardParseError, match=why):
        parse_reward(files)


# ---- verifier against a real sandbox -------------------------------------------------------------


REWARD_SCRIPTS = {
    "txt-one": ("echo 1 > /logs/verifier/reward.txt", 1.0, True, None),
    "txt-zero": ("echo 0 > /logs/verifier/reward.txt", 0.0, False, None),
    "txt-half": ("echo 0.5 > /logs/verifier/reward.txt", 0.5, False, None),
    "json": ("echo '{\"reward\": 1, \"checks\": 4}' > /logs/verifier/reward.json", 1.0, True, None),
    "json-single": ("echo '{\"score\": 1.0}' > /logs/verifier/reward.json", 1.0, True, None),
    "missing": ("echo 'forgot the reward'", None, False, "neither"),
    "garbage": ("echo 'PASSED' > /logs/verifier/reward.txt", None, False, "one number"),
    "nan": ("echo nan > /logs/verifier/reward.txt", None, False, "finite"),
    "json-garbage": ("echo '{oops' > /logs/verifier/reward.json", None, False, "valid JSON"),
    "exit-code-ignored": ("echo 1 > /logs/verifier/reward.txt; exit 3", 1.0, True, None),
}


@needs_bwrap
@pytest.mark.parametrize("case", sorted(REWARD_SCRIPTS))
async def test_verifier_rewards(tmp_path: Path, sandbox_for, case: str) -> None:
    script, reward, passed, error = REWARD_SCRIPTS[case]
    task = write_task(tmp_path, "t", test_sh=f"#!/bin/bash\nmkdir -p /logs/verifier\n{script}\n")
    sb = await sandbox_for(task)
    try:
        result = await run_verifier(task, sb, tmp_path / "out")
    finally:
        await sb.stop()
    assert result.reward == reward
    assert result.passed is passed
    if error is None:
        assert result.error is None
    else:
        assert result.error and error in result.error
        assert result.passed is False
    out = tmp_path / "out"
    assert (out / "stdout.txt").is_file() and (out / "stderr.txt").is_file()
    if case.startswith("txt"):
        assert (out / "reward.txt").read_text().strip() == str(script.split()[1])
    if case == "json":
        assert json.loads((out / "reward.json").read_text())["checks"] == 4
        assert result.rewards == {"reward": 1.0, "checks": 4.0}
    if case == "exit-code-ignored":
        assert result.exit_code == 3


@needs_bwrap
async def test_verifier_timeout_is_an_error(tmp_path: Path, sandbox_for) -> None:
    task = write_task(
        tmp_path, "t", toml="[verifier]\ntimeout_sec = 1\n",
        test_sh="echo 1 > /logs/verifier/reward.txt\nsleep 30\n",
    )
    sb = await sandbox_for(task)
    try:
        result = await run_verifier(task, sb, tmp_path / "out")
    finally:
        await sb.stop()
    assert result.timed_out and not result.passed
    assert result.reward is None and "timed out after 1s" in result.error


@needs_bwrap
async def test_pass_threshold_is_configurable(tmp_path: Path, sandbox_for) -> None:
    task = write_task(tmp_path, "t", test_sh="echo 0.6 > /logs/verifier/reward.txt\n")
    sb = await sandbox_for(task)
    try:
        low = await run_verifier(task, sb, tmp_path / "a", pass_threshold=0.5)
        high = await run_verifier(task, sb, tmp_path / "b")
    finally:
        await sb.stop()
    assert (low.passed, low.reward, high.passed) == (True, 0.6, False)


@needs_bwrap
async def test_verifier_sees_tests_only_now_and_ignores_planted_rewards(
    tmp_path: Path, sandbox_for
) -> None:
    task = write_task(
        tmp_path, "t",
        toml='[verifier.env]\nEXPECTED = "42"\n',
        test_sh="""\
            #!/bin/bash
            pwd > /logs/verifier/cwd.txt
            ls /tests > /logs/verifier/tests.txt
            if [ "$(cat /app/answer.txt)" = "$EXPECTED" ]; then echo 1; else echo 0; fi \\
              > /logs/verifier/reward.txt
            """,
        env_files={"answer.txt": "41\n"},
    )
    (task.tests_dir / "helper.py").write_text("print('help')\n")
    sb = await sandbox_for(task)
    try:
        # before the verifier: no tests; the "agent" plants a reward and a fake test
        probe = await sb.exec("ls -A /tests 2>/dev/null | wc -l", timeout=10)
        assert probe.stdout.strip() == "0"
        await sb.exec(
            "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && "
            "echo 'echo 1 > /logs/verifier/reward.txt' > /tests/test.sh",
            timeout=10,
        )
        result = await run_verifier(task, sb, tmp_path / "out")
    finally:
        await sb.stop()
    out = tmp_path / "out"
    assert result.reward == 0.0 and not result.passed
    assert (out / "cwd.txt").read_text().strip() == "/app"
    assert (out / "tests.txt").read_text().split() == ["helper.py", "test.sh"]


@needs_bwrap
async def test_verifier_output_is_saved(tmp_path: Path, sandbox_for) -> None:
    task = write_task(
        tmp_path, "t",
        test_sh="echo to-stdout; echo to-stderr >&2; echo 1 > /logs/verifier/reward.txt\n",
    )
    sb = await sandbox_for(task)
    try:
        result = await run_verifier(task, sb, tmp_path / "out")
    finally:
        await sb.stop()
    assert Path(result.stdout_path).read_text() == "to-stdout\n"
    assert Path(result.stderr_path).read_text() == "to-stderr\n"


# ---- setup and oracle ----------------------------------------------------------------------------


@needs_bwrap
async def test_setup_runs_in_app_and_leaves_no_script(tmp_path: Path, sandbox_for) -> None:
    task = write_task(
        tmp_path, "t", test_sh="true\n",
        setup_sh="set -e\npwd > where.txt\necho made > made.txt\n",
        env_files={"input.txt": "x\n"},
    )
    sb = await sandbox_for(task)
    try:
        result = await run_setup(task, sb, timeout=30)
        listing = await sb.exec("ls -A /app; ls -A /tmp", timeout=10)
    finally:
        await sb.stop()
    assert result is not None and result.exit_code == 0
    assert listing.stdout.split() == ["input.txt", "made.txt", "where.txt"]
    assert (tmp_path / "trial-0" / "app" / "where.txt").read_text().strip() == "/app"


@needs_bwrap
async def test_failing_setup_is_an_infrastructure_error(tmp_path: Path, sandbox_for) -> None:
    task = write_task(
        tmp_path, "t", test_sh="true\n",
        setup_sh="echo installing things\necho 'E: package not found' >&2\nexit 7\n",
    )
    sb = await sandbox_for(task)
    try:
        with pytest.raises(TaskSetupError) as info:
            await run_setup(task, sb, timeout=30)
    finally:
        await sb.stop()
    assert isinstance(info.value, InfrastructureError)
    assert info.value.kind == "task_setup"
    assert "exit code 7" in str(info.value) and "E: package not found" in str(info.value)


@needs_bwrap
async def test_setup_timeout(tmp_path: Path, sandbox_for) -> None:
    task = write_task(tmp_path, "t", test_sh="true\n", setup_sh="sleep 30\n")
    sb = await sandbox_for(task)
    try:
        with pytest.raises(TaskSetupError, match="timed out after 1s"):
            await run_setup(task, sb, timeout=1)
    finally:
        await sb.stop()


async def test_no_setup_is_a_no_op(tmp_path: Path) -> None:
    task = write_task(tmp_path, "t", test_sh="true\n")
    assert await run_setup(task, sandbox=None, timeout=1) is None  # type: ignore[arg-type]


@needs_bwrap
async def test_oracle_then_verifier(tmp_path: Path, sandbox_for) -> None:
    task = write_task(
        tmp_path, "t",
        toml='[solution.env]\nANSWER = "42"\n',
        test_sh='[ "$(cat /app/answer.txt)" = 42 ] && echo 1 > /logs/verifier/reward.txt '
                "|| echo 0 > /logs/verifier/reward.txt\n",
        solve_sh='ls /solution > /app/solution-files.txt\necho "$ANSWER" > answer.txt\n',
    )
    sb = await sandbox_for(task)
    try:
        solved = await run_oracle(task, sb, timeout=30)
        result = await run_verifier(task, sb, tmp_path / "out")
    finally:
        await sb.stop()
    assert solved.exit_code == 0, solved.stderr
    assert result.passed and result.reward == 1.0
    assert (tmp_path / "trial-0" / "app" / "solution-files.txt").read_text().split() == ["solve.sh"]


async def test_oracle_without_solution(tmp_path: Path) -> None:
    task = write_task(tmp_path, "t", test_sh="true\n")
    with pytest.raises(FileNotFoundError, match="solve.sh"):
        await run_oracle(task, sandbox=None)  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
async def test_verifier_refuses_an_unisolated_sandbox(tmp_path: Path, sandbox_for) -> None:
    """Without isolation /tests and /logs would be this machine's own folders."""
    task = write_task(tmp_path, "t", test_sh="echo 1 > /logs/verifier/reward.txt\n",
                      solve_sh="true\n")
    sb = await sandbox_for(task, isolation="none")
    try:
        with pytest.raises(InfrastructureError, match="without isolation"):
            await run_verifier(task, sb, tmp_path / "out")
        with pytest.raises(InfrastructureError, match="without isolation"):
            await run_oracle(task, sb)
    finally:
        await sb.stop()
