"""The CI loop: rounds of hidden tests → Architect → Programmer → a(c_i), resumable per round.

Per round i (1..N, N = [ci] rounds):
  1. the previous codebase's test run (round 0: the base) gives the non-passing summary;
  2. the Architect (the workspace next to this file, shipped with AHE) writes requirements;
  3. the harness under evolution, as Programmer, implements them in /app;
  4. the task's verifier grades the codebase c_i (verifier/round-NN/), /app is snapshot to
     ci/app-round-NN.tar.gz and the round's line goes to verifier/rounds.jsonl.
The loop stops once a(c_i) = 1 or after round N. A trial killed mid-round restarts that
round from the snapshot of the last finished one; a finished round is never redone.
The rollout layer (`ahe.rollout.ci_trial`) owns the sandbox and turns this into a result.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ahe.errors import InfrastructureError
from ahe.runtime.trace import now_iso
from ahe.tasks.model import Task
from ahe.tasks.sources.swe_ci import rounds as R
from ahe.tasks.sources.swe_ci.layout import CISettings
from ahe.tasks.sources.swe_ci.metrics import regressions

ARCHITECT_WORKSPACE = Path(__file__).resolve().parent / "architect"
SNAPSHOT = "/tmp/.ahe-ci-app.tar.gz"
READ_ONLY = "/tmp/.ahe-ci-architect.tar.gz"  # /app as the Architect found it


class RoundFailed(Exception):
    """A round could not finish (the verifier left no result): the trial ends with this error."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


@dataclass
class LoopEnv:
    """What one CI trial's rounds run with; the sandbox is started and set up already."""

    task: Task
    sandbox: Any
    programmer: Any  # the harness under evolution: its workspace folder (run confined), or a loaded agent
    architect: Any  # the Architect workspace, loaded
    client: Any  # the model client both agents use
    trial_dir: Path
    ci: CISettings
    expected: dict
    session_wall_sec: float
    verifier_timeout_sec: float | None = None
    pass_threshold: float = 1.0
    on_round: Any = None  # called with each finished RoundRecord
    isolation: str = "auto"  # the confined worker's mode for the programmer (the rollout's isolation)
    backend: Any = None  # the agent backend (ahe.agents) that runs the programmer's harness; None = `ahe`
    model_requests_per_turn: int = 4  # the user's cap at the gateway (config), per turn of the programmer


def _children(folder: Path) -> list[Path]:
    return list(folder.iterdir()) if folder.is_dir() else []


def finished_rounds(trial_dir: Path) -> list[R.RoundRecord]:
    """The rounds a trial folder can resume after (their snapshot must be there)."""
    done = R.read_rounds(trial_dir / "verifier") if trial_dir.is_dir() else []
    if done and not (trial_dir / "ci" / f"app-round-{len(done):02d}.tar.gz").is_file():
        return []  # no snapshot to resume from: start over
    return done


def keep_finished(trial_dir: Path, done: int) -> None:
    """Remove everything a half-finished round (or an unfinished start) left behind."""
    if done == 0:
        shutil.rmtree(trial_dir, ignore_errors=True)
        trial_dir.mkdir(parents=True)
        return
    for child in trial_dir.iterdir():
        if child.name not in {"verifier", "ci", "sub_agents"}:
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


async def _pin_app(sandbox: Any) -> None:
    run = await sandbox.exec(f"tar -czf {READ_ONLY} -C /app . && echo ok", timeout=600)
    if "ok" not in run.stdout:
        raise InfrastructureError(f"could not save /app before the Architect: {run.stderr[-300:]}", kind="sandbox")


async def _unpin_app(sandbox: Any) -> None:
    """Put /app back as it was before the Architect: it reads the code, it never changes it."""
    run = await sandbox.exec(
        f"find /app -mindepth 1 -maxdepth 1 -exec rm -rf {{}} + && tar -xzf {READ_ONLY} -C /app && rm -f {READ_ONLY} && echo ok",
        timeout=600,
    )
    if "ok" not in run.stdout:
        raise InfrastructureError(f"could not restore /app after the Architect: {run.stderr[-300:]}", kind="sandbox")


async def _grade(env: LoopEnv, out: Path) -> tuple[dict, dict]:
    """Run the verifier on the current /app; (rewards, test statuses)."""
    from ahe.tasks.phases import run_verifier

    verdict = await run_verifier(env.task, env.sandbox, out, env.verifier_timeout_sec, pass_threshold=env.pass_threshold)
    statuses_path = out / "test_results.json"
    if verdict.error or not statuses_path.is_file():
        raise RoundFailed("verifier_error", verdict.error or "the verifier wrote no test_results.json")
    return verdict.rewards, json.loads(statuses_path.read_text())


async def _session(env: LoopEnv, agent: Any, trace_dir: Path, message: str) -> Any:
    from ahe.runtime import Session, StopReason

    if isinstance(agent, Path):  # the harness's own code: its backend runs it confined (docs/backends.md)
        from ahe.agents import AgentRequest, make_agent_backend

        backend = env.backend or make_agent_backend("ahe")
        res = await backend.run(AgentRequest(harness=agent, instruction=message, trace_dir=trace_dir, client=env.client,
                                             sandbox=env.sandbox, isolation=env.isolation,  # type: ignore[arg-type]
                                             wall_clock_sec=env.session_wall_sec,
                                             model_requests_per_turn=env.model_requests_per_turn))
    else:
        res = await Session(agent, env.client, sandbox=env.sandbox, trace_dir=trace_dir,
                            wall_clock_sec=env.session_wall_sec).run(message)
    if res.stop_reason == StopReason.infra_error:
        raise InfrastructureError(f"{res.agent}: {res.detail}", kind=res.infra_error_kind or "llm")
    return res


async def _run_round(env: LoopEnv, i: int, prev: dict) -> tuple[R.RoundRecord, dict]:
    """One round on the live sandbox; returns its record and the new codebase's statuses."""
    t0 = time.monotonic()
    summary, _ = R.failing_summary(prev, env.expected)
    subs, rounds = env.trial_dir / "sub_agents", env.ci.rounds
    await _pin_app(env.sandbox)
    arch = await _session(env, env.architect, subs / f"r{i:02d}-architect",
                          R.ARCHITECT_MESSAGE.format(round=i, rounds=rounds, summary=summary))
    await _unpin_app(env.sandbox)
    requirements = (arch.final_answer or "").strip() or "(the Architect gave no requirements; make the failing tests pass)"
    prog = await _session(env, env.programmer, subs / f"r{i:02d}-programmer",
                          R.PROGRAMMER_MESSAGE.format(round=i, rounds=rounds, instruction=env.task.instruction.strip(),
                                                      requirements=requirements))
    rewards, statuses = await _grade(env, env.trial_dir / "verifier" / f"round-{i:02d}")
    target = set(env.expected["target_tests"])
    before = {t: s for t, s in prev.get("tests", {}).items() if t in target}
    record = R.RoundRecord(
        round=i, a=rewards["normalized_change"], n_pass=int(rewards["n_pass"]),
        failing=len(target) - int(rewards["n_pass"]), regressions=regressions(before, statuses.get("tests", {})),
        requirements=requirements, architect_stop=arch.stop_reason.value, programmer_stop=prog.stop_reason.value,
        programmer_answer=prog.final_answer, usage=arch.usage.add(prog.usage), turns=prog.turns,
        tool_calls=prog.tool_calls, tool_errors=prog.tool_errors,
        duration_sec=round(time.monotonic() - t0, 3), finished_at=now_iso(),
    )
    return record, statuses


async def run_rounds(env: LoopEnv, done: list[R.RoundRecord], session_id: str) -> list[R.RoundRecord]:
    """Run the rounds after `done` (restoring /app from the last finished one); all records."""
    verifier = env.trial_dir / "verifier"
    if done:
        await _restore(env.sandbox, env.trial_dir / "ci" / f"app-round-{len(done):02d}.tar.gz")
        prev = json.loads((verifier / f"round-{len(done):02d}" / "test_results.json").read_text())
    else:
        _, prev = await _grade(env, verifier / "round-00")
    records = list(done)
    while len(records) < env.ci.rounds and not (records and records[-1].a >= 1.0):
        i = len(records) + 1
        record, prev = await _run_round(env, i, prev)
        await _snapshot(env.sandbox, env.trial_dir / "ci" / f"app-round-{i:02d}.tar.gz")
        R.append_round(verifier, record)  # the commit point of the round
        (env.trial_dir / "ci" / f"app-round-{i - 1:02d}.tar.gz").unlink(missing_ok=True)
        records.append(record)
        R.write_trajectory(env.trial_dir / "trajectory.json", records, session_id)
        if env.on_round is not None:
            env.on_round(record)
    return records
