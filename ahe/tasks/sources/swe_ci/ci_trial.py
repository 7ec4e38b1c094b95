"""A CI trial: rounds of hidden tests → Architect → Programmer → a(c_i), resumable per round.

Per round i (1..N, N = [ci] rounds):
  1. the previous codebase's test run (round 0: the base) gives the non-passing summary;
  2. the Architect (the workspace next to this file, shipped with AHE) writes requirements;
  3. the harness under evolution, as Programmer, implements them in /app;
  4. the task's verifier grades the codebase c_i (verifier/round-NN/), /app is snapshot to
     ci/app-round-NN.tar.gz and the round's line goes to verifier/rounds.jsonl.
The loop stops once a(c_i) = 1 or after round N. A trial killed mid-round restarts that
round from the snapshot of the last finished one; a finished round is never redone.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import traceback
from pathlib import Path
from typing import Any

from ahe.errors import InfrastructureError
from ahe.rollout.models import TrialResult, TrialSpec
from ahe.io import atomic_write_json
from ahe.runtime.trace import now_iso
from ahe.tasks.sources.swe_ci import rounds as R
from ahe.tasks.sources.swe_ci.layout import CISettings

ARCHITECT_WORKSPACE = Path(__file__).resolve().parent / "architect"
SNAPSHOT = "/tmp/.ahe-ci-app.tar.gz"


class RoundFailed(Exception):
    """A round could not finish (the verifier left no result): the trial ends with this error."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


def _children(folder: Path) -> list[Path]:
    return list(folder.iterdir()) if folder.is_dir() else []


def _keep_finished(trial_dir: Path, done: int) -> None:
    """Remove everything a half-finished round (or an unfinished start) left behind."""
    if done == 0:
        shutil.rmtree(trial_dir, ignore_errors=True)
        trial_dir.mkdir(parents=True)
        return
    keep = {"verifier", "ci", "sub_agents"}
    for child in trial_dir.iterdir():
        if child.name not in keep:
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    finished = {f"round-{i:02d}" for i in range(done + 1)} | {R.ROUNDS_FILE}
    for child in _children(trial_dir / "verifier"):
        if child.name not in finished:
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    for child in _children(trial_dir / "sub_agents"):
        if not child.name[1:3].isdigit() or int(child.name[1:3]) > done:
            shutil.rmtree(child)
    for child in _children(trial_dir / "ci"):
        if child.name != f"app-round-{done:02d}.tar.gz":
            child.unlink()


async def _snapshot(sandbox: Any, dest: Path) -> None:
    run = await sandbox.exec(f"tar -czf {SNAPSHOT} -C /app . && echo ok", timeout=600)
    if "ok" not in run.stdout:
        raise InfrastructureError(f"could not snapshot /app: {run.stderr[-300:]}", kind="sandbox")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".part")
    tmp.write_bytes(await sandbox.read_file(SNAPSHOT))
    tmp.replace(dest)
    await sandbox.exec(f"rm -f {SNAPSHOT}", timeout=60)


async def _restore(sandbox: Any, src: Path) -> None:
    await sandbox.write_file(SNAPSHOT, src.read_bytes())
    run = await sandbox.exec(
        f"find /app -mindepth 1 -maxdepth 1 -exec rm -rf {{}} + && tar -xzf {SNAPSHOT} -C /app && rm -f {SNAPSHOT} && echo ok",
        timeout=600,
    )
    if "ok" not in run.stdout:
        raise InfrastructureError(f"could not restore /app from {src}: {run.stderr[-300:]}", kind="sandbox")


async def _grade(task: Any, sandbox: Any, out: Path, spec: TrialSpec) -> tuple[dict, dict]:
    """Run the verifier on the current /app; (rewards, test statuses)."""
    from ahe.tasks.phases import run_verifier

    verdict = await run_verifier(task, sandbox, out, spec.verifier_timeout_sec, pass_threshold=spec.pass_threshold)
    statuses_path = out / "test_results.json"
    if verdict.error or not statuses_path.is_file():
        raise RoundFailed("verifier_error", verdict.error or "the verifier wrote no test_results.json")
    return verdict.rewards, json.loads(statuses_path.read_text())


async def _session(ctx: Any, agent: Any, client: Any, sandbox: Any, trace_dir: Path, message: str, wall: float) -> Any:
    from ahe.runtime import Session, StopReason

    res = await Session(agent, client, sandbox=sandbox, trace_dir=trace_dir, wall_clock_sec=wall).run(message)
    if res.stop_reason == StopReason.infra_error:
        raise InfrastructureError(f"{agent.name}: {res.detail}", kind=res.infra_error_kind or "llm")
    return res


async def _run_round(i: int, ci: CISettings, env: dict, prev: dict, result: TrialResult) -> tuple[R.RoundRecord, dict]:
    """One round on the live sandbox; returns its record and the new codebase's statuses."""
    t0 = time.monotonic()
    spec, task, sandbox, expected = env["spec"], env["task"], env["sandbox"], env["expected"]
    summary, _ = R.failing_summary(prev, expected)
    wall = spec.agent_timeout_sec or task.agent_timeout_sec
    subs = spec.trial_dir / "sub_agents"
    arch = await _session(env["ctx"], env["architect"], env["client"], sandbox, subs / f"r{i:02d}-architect",
                          R.ARCHITECT_MESSAGE.format(round=i, rounds=ci.rounds, summary=summary), wall)
    requirements = (arch.final_answer or "").strip() or "(the Architect gave no requirements; make the failing tests pass)"
    prog = await _session(env["ctx"], env["programmer"], env["client"], sandbox, subs / f"r{i:02d}-programmer",
                          R.PROGRAMMER_MESSAGE.format(round=i, rounds=ci.rounds, instruction=task.instruction.strip(),
                                                      requirements=requirements), wall)
    result.stop_reason = prog.stop_reason.value
    rewards, statuses = await _grade(task, sandbox, spec.trial_dir / "verifier" / f"round-{i:02d}", spec)
    target = set(expected["target_tests"])
    before = {t: s for t, s in prev.get("tests", {}).items() if t in target}
    from ahe.tasks.sources.swe_ci.metrics import regressions

    record = R.RoundRecord(
        round=i, a=rewards["normalized_change"], n_pass=int(rewards["n_pass"]),
        failing=len(target) - int(rewards["n_pass"]), regressions=regressions(before, statuses.get("tests", {})),
        requirements=requirements, architect_stop=arch.stop_reason.value, programmer_stop=prog.stop_reason.value,
        programmer_answer=prog.final_answer, usage=arch.usage.add(prog.usage), turns=prog.turns,
        tool_calls=prog.tool_calls, tool_errors=prog.tool_errors,
        duration_sec=round(time.monotonic() - t0, 3), finished_at=now_iso(),
    )
    return record, statuses


async def _loop(env: dict, ci: CISettings, done: list[R.RoundRecord], result: TrialResult) -> list[R.RoundRecord]:
    spec, sandbox = env["spec"], env["sandbox"]
    verifier = spec.trial_dir / "verifier"
    if done:
        await _restore(sandbox, spec.trial_dir / "ci" / f"app-round-{len(done):02d}.tar.gz")
        prev = json.loads((verifier / f"round-{len(done):02d}" / "test_results.json").read_text())
    else:
        _, prev = await _grade(env["task"], sandbox, verifier / "round-00", spec)
    records = list(done)
    while len(records) < ci.rounds and not (records and records[-1].a >= 1.0):
        i = len(records) + 1
        record, prev = await _run_round(i, ci, env, prev, result)
        await _snapshot(sandbox, spec.trial_dir / "ci" / f"app-round-{i:02d}.tar.gz")
        R.append_round(verifier, record)  # the commit point of the round
        (spec.trial_dir / "ci" / f"app-round-{i - 1:02d}.tar.gz").unlink(missing_ok=True)
        records.append(record)
        R.write_trajectory(spec.trial_dir / "trajectory.json", records, f"{spec.task_name}-{spec.trial}")
    return records


async def execute_ci_trial(spec: TrialSpec, ctx: Any, ci: CISettings) -> TrialResult:
    """Run (or resume) one CI trial and write its result.json. Never raises for trial failures."""
    from ahe.rollout.trial import RESULT_FILE, SCRATCH, _sandbox_for
    from ahe.runtime import load_agent
    from ahe.tasks import load_task, run_setup

    t0 = time.monotonic()
    done: list[R.RoundRecord] = R.read_rounds(spec.trial_dir / "verifier") if spec.trial_dir.is_dir() else []
    if done and not (spec.trial_dir / "ci" / f"app-round-{len(done):02d}.tar.gz").is_file():
        done = []  # no snapshot to resume from: start over
    _keep_finished(spec.trial_dir, len(done))
    result = TrialResult(task=spec.task_name, trial=spec.trial, attempt=spec.attempt, started_at=now_iso())
    sandbox = None
    try:
        task = load_task(spec.task_dir)
        env = {"spec": spec, "task": task, "ctx": ctx, "client": ctx.client(spec),
               "programmer": ctx.agent(spec.workspace), "architect": load_agent(ARCHITECT_WORKSPACE),
               "expected": json.loads((task.tests_dir / "expected.json").read_text())}
        sandbox = env["sandbox"] = _sandbox_for(spec, task)
        await sandbox.start()
        await run_setup(task, sandbox)
        t_agent = time.monotonic()
        records = await _loop(env, ci, done, result)
        result.agent_duration_sec = round(time.monotonic() - t_agent, 3)
        for r in records:  # the finished rounds of an earlier process count too
            result.usage = result.usage.add(r.usage)
            result.turns, result.tool_calls, result.tool_errors = (
                result.turns + r.turns, result.tool_calls + r.tool_calls, result.tool_errors + r.tool_errors)
        rewards = R.final_rewards(records, ci, env["expected"])
        atomic_write_json(spec.trial_dir / "verifier" / "reward.json", rewards)
        result.raw_reward, result.rewards = rewards["reward"], rewards
        result.passed = rewards["reward"] >= spec.pass_threshold
        result.reward = 1.0 if result.passed else 0.0
    except RoundFailed as exc:
        result.error_class, result.error = exc.error_class, str(exc)  # type: ignore[assignment]
    except InfrastructureError as exc:
        result.error_class, result.error = "infra", f"{type(exc).__name__}: {exc}"
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a bug or bad input around the trial: infra, with the trace kept
        result.error_class, result.error = "infra", f"{type(exc).__name__}: {exc}"
        (spec.trial_dir / "error.txt").write_text(traceback.format_exc())
    finally:
        if sandbox is not None:
            try:
                await sandbox.stop()
            except Exception as exc:  # stopping must not hide the trial's own outcome
                (spec.trial_dir / "sandbox-stop-error.txt").write_text(repr(exc))
    result.duration_sec = round(time.monotonic() - t0, 3)
    for scratch in SCRATCH + (() if spec.keep_app else ("app",)):
        shutil.rmtree(spec.trial_dir / scratch, ignore_errors=True)
    atomic_write_json(spec.trial_dir / RESULT_FILE, json.loads(result.model_dump_json()))
    return result
