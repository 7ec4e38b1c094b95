"""The phases of a trial that belong to the task, run on any `Sandbox` (DESIGN.md §5, §6).

Order in a trial::

    prepare_app_dir(task, app_dir)          host side, local tasks: environment/ -> /app
    sandbox.start()
    await run_setup(task, sandbox, t)       environment/setup.sh, cwd /app (local tasks)
    ... the agent works (or run_oracle for the reference solution) ...
    await run_verifier(task, sandbox, out)  tests/ -> /tests, bash /tests/test.sh, reward

Rewards follow harbor: test.sh writes `/logs/verifier/reward.txt` (one number) or
`/logs/verifier/reward.json` (a flat {name: number} object); its exit code is ignored. See
`parse_reward` for how the JSON object becomes one reward.
"""

from __future__ import annotations

import json
import math
import shutil
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ahe.errors import InfrastructureError
from ahe.sandbox.base import ExecResult, Sandbox, SandboxError
from ahe.tasks.loader import resolve_env
from ahe.tasks.model import DOCKERFILE_NAME, SETUP_SCRIPT_NAME, Task
from ahe.tasks.verifier_guard import end_processes, remove_planted, replaced_interpreters, verifier_python_env

APP_DIR = "/app"
TESTS_DIR = "/tests"
SOLUTION_DIR = "/solution"
VERIFIER_LOG_DIR = "/logs/verifier"
REWARD_FILES = ("reward.txt", "reward.json")
DEFAULT_PASS_THRESHOLD = 1.0
_TAIL_CHARS = 2000


class TaskSetupError(InfrastructureError):
    """environment/setup.sh failed: the trial never started, so it is not the agent's fault."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="task_setup")


class VerifierResult(BaseModel):
    """What the verifier concluded. `passed` is never true when `error` is set."""

    reward: float | None = None
    rewards: dict[str, float] = Field(
        default_factory=dict, description="every numeric entry of reward.json (or {'reward': x})"
    )
    passed: bool = False
    pass_threshold: float = DEFAULT_PASS_THRESHOLD
    error: str | None = None
    reward_file: str | None = Field(default=None, description="reward.json or reward.txt")
    exit_code: int | None = None
    timed_out: bool = False
    duration_sec: float = 0.0
    stdout_path: str | None = None
    stderr_path: str | None = None
    tampered: list[str] = Field(
        default_factory=list,
        description="what the agent left for the verifier to run in its place (removed, or: the trial fails)")


class RewardParseError(ValueError):
    """A reward file that does not hold a usable reward."""


# --------------------------------------------------------------------------------------------
# host side
# --------------------------------------------------------------------------------------------


def _app_ignore(env_dir: Path):
    top = env_dir.resolve()

    def ignore(folder: str, names: list[str]) -> set[str]:
        if Path(folder).resolve() != top:
            return set()
        return {n for n in names if n in (DOCKERFILE_NAME, SETUP_SCRIPT_NAME)}

    return ignore


def prepare_app_dir(task: Task, app_dir: str | Path) -> Path:
    """Fill the host folder that becomes /app with the task's starting files.

    For a local task this copies environment/ without its top-level Dockerfile and setup.sh
    (symlinks are copied as links, modes are kept). For a docker task the image provides
    /app, so only the (empty) folder is created. Returns the folder.
    """
    target = Path(app_dir)
    target.mkdir(parents=True, exist_ok=True)
    env_dir = task.environment_dir
    if task.runs_on != "local" or not env_dir.is_dir():
        return target
    shutil.copytree(
        env_dir, target, symlinks=True, dirs_exist_ok=True, ignore=_app_ignore(env_dir)
    )
    return target


# --------------------------------------------------------------------------------------------
# sandbox side
# --------------------------------------------------------------------------------------------


def _require_isolation(sandbox: Sandbox, what: str) -> None:
    """Refuse a sandbox that says it is not isolated (LocalSandbox's no-bwrap fallback).

    There, absolute paths in commands are the host's own: /tests, /solution and /logs would
    be created, cleared and written on this machine.
    """
    if getattr(sandbox, "isolated", True) is False:
        raise SandboxError(
            f"cannot run the {what} in a sandbox without isolation: /tests, /solution and "
            "/logs would be this machine's own folders; install bubblewrap (`ahe doctor`) or "
            "use the docker sandbox"
        )


def _tail(text: str, limit: int = _TAIL_CHARS) -> str:
    text = text.rstrip()
    return text if len(text) <= limit else "…" + text[-limit:]


def _output_tail(result: ExecResult) -> str:
    parts = [p for p in (result.stdout.rstrip(), result.stderr.rstrip()) if p]
    return _tail("\n".join(parts)) or "(no output)"


async def run_setup(
    task: Task, sandbox: Sandbox, timeout: float | None = None
) -> ExecResult | None:
    """Run environment/setup.sh once, cwd /app, before the agent starts.

    The script is written to a private temporary path, run with `bash` and removed again, so
    the agent never sees it. Returns None when the task has no setup. Raises `TaskSetupError`
    (an infrastructure error) with the tail of the output when it fails or times out.
    """
    if not task.has_setup:
        return None
    assert task.environment.setup_script is not None
    limit = task.environment.build_timeout_sec if timeout is None else timeout
    remote = f"/tmp/.ahe-setup-{uuid.uuid4().hex}.sh"
    try:
        await sandbox.write_file(remote, task.environment.setup_script.read_bytes())
        result = await sandbox.exec(
            f"bash {remote}", timeout=limit, cwd=APP_DIR,
            env=resolve_env(task.environment.env, where=f"{task.task_toml}: [environment] env")
            or None,
        )
    finally:
        try:
            await sandbox.exec(f"rm -f {remote}", timeout=30)
        except Exception:  # noqa: BLE001 - cleanup must not hide the real outcome
            pass
    if result.timed_out:
        raise TaskSetupError(
            f"{task.environment.setup_script}: setup timed out after {limit:g}s; output tail: "
            f"{_output_tail(result)}"
        )
    if result.exit_code != 0:
        raise TaskSetupError(
            f"{task.environment.setup_script}: setup failed with exit code {result.exit_code}; "
            f"output tail: {_output_tail(result)}"
        )
    return result


async def run_oracle(task: Task, sandbox: Sandbox, timeout: float | None = None) -> ExecResult:
    """Play the reference solution: upload solution/ to /solution, run solve.sh, cwd /app.

    Uses the agent timeout by default. Raises `FileNotFoundError` when the task has no
    solution/solve.sh; a failing solve.sh is returned, not raised (the verifier decides).
    """
    if not task.has_solution:
        raise FileNotFoundError(f"{task.solve_script}: the task has no reference solution")
    _require_isolation(sandbox, "oracle")
    limit = task.agent_timeout_sec if timeout is None else timeout
    await sandbox.exec(f"rm -rf {SOLUTION_DIR}", timeout=60)
    await sandbox.upload(task.solution_dir, SOLUTION_DIR)
    env = resolve_env(task.solution_env, where=f"{task.task_toml}: [solution] env")
    return await sandbox.exec(
        f"bash {SOLUTION_DIR}/solve.sh", timeout=limit, cwd=APP_DIR, env=env or None
    )


def parse_reward(files: dict[str, bytes]) -> tuple[float, dict[str, float], str]:
    """Turn the verifier's reward files into (reward, all rewards, file used).

    `files` maps "reward.txt" / "reward.json" to their content. Harbor's rules:

    * reward.json wins when present. It must be a JSON object; entries whose value is not a
      number (strings, lists, booleans) are ignored. The reward is its "reward" entry; else
      reward.txt's number when that file exists too; else the only entry when there is
      exactly one; otherwise the object is ambiguous and is an error.
    * reward.txt holds one number (surrounding whitespace allowed).
    * NaN and infinities are errors, never a pass; so are empty files.

    Raises `RewardParseError` with a one-line reason.
    """
    if "reward.json" in files:
        raw = files["reward.json"]
        if not raw.strip():
            raise RewardParseError("reward.json is empty")
        try:
            parsed: Any = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise RewardParseError(f"reward.json is not valid JSON ({exc})") from None
        if not isinstance(parsed, dict):
            raise RewardParseError(
                f"reward.json must be an object like {{\"reward\": 1}}, got {type(parsed).__name__}"
            )
        rewards = {
            str(k): float(v) for k, v in parsed.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        bad = sorted(k for k, v in rewards.items() if not math.isfinite(v))
        if bad:
            raise RewardParseError(f"reward.json has non-finite values for {', '.join(bad)}")
        if "reward" in rewards:
            return rewards["reward"], rewards, "reward.json"
        if "reward.txt" in files:
            value = _parse_reward_text(files["reward.txt"])
            return value, {**rewards, "reward": value}, "reward.json"
        if len(rewards) == 1:
            return next(iter(rewards.values())), rewards, "reward.json"
        if not rewards:
            raise RewardParseError("reward.json holds no numeric entry")
        raise RewardParseError(
            f"reward.json has {len(rewards)} entries ({', '.join(sorted(rewards))}) and no "
            "\"reward\" key, so the reward is ambiguous"
        )
    if "reward.txt" in files:
        value = _parse_reward_text(files["reward.txt"])
        return value, {"reward": value}, "reward.txt"
    raise RewardParseError(
        f"the verifier wrote neither {VERIFIER_LOG_DIR}/reward.txt nor reward.json"
    )


def _parse_reward_text(raw: bytes) -> float:
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        raise RewardParseError("reward.txt is empty")
    try:
        value = float(text)
    except ValueError:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise RewardParseError(f"reward.txt does not hold one number (got {shown!r})") from None
    if not math.isfinite(value):
        raise RewardParseError(f"reward.txt holds {text!r}, which is not a finite number")
    return value


async def _read_reward_files(sandbox: Sandbox) -> dict[str, bytes]:
    listing = await sandbox.exec(
        " ; ".join(
            f"[ -f {VERIFIER_LOG_DIR}/{name} ] && echo {name}" for name in REWARD_FILES
        ) + " ; true",
        timeout=60,
    )
    present = [n for n in listing.stdout.split() if n in REWARD_FILES]
    return {name: await sandbox.read_file(f"{VERIFIER_LOG_DIR}/{name}") for name in present}


async def run_verifier(
    task: Task,
    sandbox: Sandbox,
    out_dir: str | Path,
    timeout: float | None = None,
    *,
    pass_threshold: float = DEFAULT_PASS_THRESHOLD,
) -> VerifierResult:
    """Run the task's tests once the agent has finished, and read the reward.

    Uploads tests/ to /tests (only now; anything the agent put at /tests or in
    /logs/verifier is removed first), runs `bash /tests/test.sh` with cwd /app and the
    [verifier] env under the verifier timeout, copies /logs/verifier into `out_dir`, writes
    the script's output to `out_dir/stdout.txt` and `out_dir/stderr.txt`, and parses the
    reward files (`parse_reward`). A timeout, a missing or unusable reward is a
    `VerifierResult` with `error` set and `passed=False`; the exit code of test.sh is
    recorded but ignored. `passed` is `reward >= pass_threshold`.
    """
    _require_isolation(sandbox, "verifier")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in (*REWARD_FILES, "tampered.txt"):  # never let a previous run's record stand
        (out / name).unlink(missing_ok=True)
    limit = task.verifier_timeout_sec if timeout is None else timeout
    result = VerifierResult(pass_threshold=pass_threshold)

    # Nothing the agent started runs while the verifier does (a leftover loop writing
    # reward.txt, rewriting /tests or the verifier's output): its processes end first, all of them.
    await end_processes(sandbox)
    replaced = await replaced_interpreters(sandbox)
    if replaced:  # whatever a replaced python or bash says, it is not the verifier's verdict
        result.tampered, result.reward = replaced, 0.0
        (out / "tampered.txt").write_text(
            "not run: the agent replaced what the verifier runs: " + ", ".join(replaced) + "\n")
        return result
    # The agent may have planted /logs/verifier/reward.txt or a fake /tests: clear both
    # (a mount point itself survives `rm -rf`, its content does not).
    await sandbox.exec(
        f"rm -rf {TESTS_DIR} {VERIFIER_LOG_DIR} 2>/dev/null ; mkdir -p {VERIFIER_LOG_DIR}",
        timeout=60,
    )
    await sandbox.upload(task.tests_dir, TESTS_DIR)
    env = {**verifier_python_env(),
           **resolve_env(task.verifier_env, where=f"{task.task_toml}: [verifier] env")}
    result.tampered = await remove_planted(sandbox, env)
    if result.tampered:
        (out / "tampered.txt").write_text("removed before the verifier ran: " + ", ".join(result.tampered) + "\n")
    run = await sandbox.exec(
        f"bash {TESTS_DIR}/test.sh", timeout=limit, cwd=APP_DIR, env=env
    )

    # Everything test.sh left in /logs/verifier (ctrf.json, …) is kept for the record; the
    # reward files are then read through the sandbox (never by following a link on the host).
    try:
        await sandbox.download(VERIFIER_LOG_DIR, out)
    except Exception:  # noqa: BLE001 - the record is a bonus; the reward is read below
        pass
    for name in REWARD_FILES:
        if (out / name).is_symlink():
            (out / name).unlink()

    stdout_path, stderr_path = out / "stdout.txt", out / "stderr.txt"
    stdout_path.write_text(run.stdout, encoding="utf-8")
    stderr_path.write_text(run.stderr, encoding="utf-8")
    result.exit_code = run.exit_code
    result.timed_out = run.timed_out
    result.duration_sec = run.duration_sec
    result.stdout_path = str(stdout_path)
    result.stderr_path = str(stderr_path)

    if run.timed_out:
        result.error = f"verifier timed out after {limit:g}s"
        return result

    files = await _read_reward_files(sandbox)
    for name, data in files.items():
        (out / name).write_bytes(data)
    try:
        reward, rewards, used = parse_reward(files)
    except RewardParseError as exc:
        result.error = f"{exc} (test.sh exit code {run.exit_code})"
        return result
    result.reward = reward
    result.rewards = rewards
    result.reward_file = used
    result.passed = reward >= pass_threshold
    return result

