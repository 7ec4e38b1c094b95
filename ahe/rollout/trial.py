"""One trial: fresh sandbox, setup, the agent's session, the verifier, result.json.

`result.json` is written last and atomically: its presence is what marks a trial finished.
A trial folder without it is half-finished and is re-run from scratch on resume.
Failures of the world (model endpoint, sandbox, task setup) are classified `infra`, apart
from the agent's own failures, so they can be counted on their own and retried.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ahe.errors import AheError, InfrastructureError
from ahe.llm.types import ModelClient
from ahe.llm.usage import UsageLedger
from ahe.rollout.models import TrialResult, TrialSpec
from ahe.runtime.trace import now_iso
from ahe.tasks.snapshot import TaskChanged, TaskSeal
from ahe.io import atomic_write_json

RESULT_FILE = "result.json"


@dataclass
class TrialContext:
    """Per-process caches shared by the trials an executor runs: clients, usage, spare confined
    workers. The harness itself is never loaded here: each trial's worker loads it."""

    ledger: UsageLedger = field(default_factory=UsageLedger)
    # Where model clients read base URL, model and key; None = os.environ. A Ray worker passes
    # the keys it was handed in memory, so they never enter its process environment.
    env: Mapping[str, str] | None = None
    _clients: dict[str, ModelClient] = field(default_factory=dict)
    _workers: Any = None  # ahe.confine.pool.WorkerPool: spare confined workers, made on first use

    def workers(self) -> Any:
        if self._workers is None:
            from ahe.confine.pool import WorkerPool

            self._workers = WorkerPool()
        return self._workers

    def client(self, spec: TrialSpec) -> ModelClient:
        key = spec.agent_role.model_dump_json()
        if key not in self._clients:
            from ahe.llm import make_client

            env = os.environ if self.env is None else self.env
            self._clients[key] = make_client("agent", spec.agent_role, ledger=self.ledger, env=env)
        return self._clients[key]

    async def aclose(self) -> None:
        """Close the clients' connection pools on the loop that opened them (else they are closed
        by the garbage collector on a loop that is gone: "Event loop is closed"); kill the spare
        confined workers."""
        if self._workers is not None:
            await self._workers.aclose()
            self._workers = None
        for client in self._clients.values():
            close = getattr(client, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception:  # a pool that fails to close loses no result
                    pass


def load_result(trial_dir: Path) -> TrialResult | None:
    """The finished result of a trial folder, or None when it is absent or unreadable."""
    path = trial_dir / RESULT_FILE
    try:
        return TrialResult.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None


def seal_of(spec: TrialSpec) -> TaskSeal | None:
    """The seal this trial's verifier runs from: travelling with the spec, or the run's seal folder's."""
    if spec.sealed is not None:
        return spec.sealed
    if spec.seal_dir is None:
        return None
    from ahe.tasks.snapshot import sealed_entry

    return sealed_entry(spec.seal_dir, spec.task_name)


def _sandbox_for(spec: TrialSpec, task: Any) -> Any:
    from ahe.tasks.sandboxes import factories_for

    factories = factories_for(spec.sandbox, isolation=spec.isolation)
    factory = factories.get(task.runs_on)
    if factory is None:  # plan_rollouts skips these; a hand-made spec may not
        raise AheError(f"task {task.name} needs --sandbox {task.runs_on}")
    return factory(task, spec.trial_dir)


# Scratch a finished trial does not need: staged verifier files, the sandbox's /tmp and home.
# root/logs (full output of every command, /logs inside the sandbox) is kept for the debugger.
SCRATCH = ("stage", "root/tmp", "root/home")


async def execute_trial(spec: TrialSpec, ctx: TrialContext) -> TrialResult:
    """Run one trial from scratch and write its result.json. Never raises for trial failures."""
    from ahe.confine.host import ConfinedSessionSpec
    from ahe.confine.budget import trial_budget
    from ahe.runtime import StopReason
    from ahe.tasks import load_task, run_setup, run_verifier
    from ahe.tasks.snapshot import check_folder, verifier_task

    from ahe.rollout.ci_trial import ci_trial_or_none

    ci_run = ci_trial_or_none(spec, ctx)  # a task with [ci] rounds is a CI-loop trial (resumable per round)
    if ci_run is not None:
        return await ci_run
    t0 = time.monotonic()
    if spec.trial_dir.exists():
        shutil.rmtree(spec.trial_dir)  # a half-finished trial is re-run from scratch
    spec.trial_dir.mkdir(parents=True)
    result = TrialResult(task=spec.task_name, trial=spec.trial, attempt=spec.attempt, started_at=now_iso())
    sandbox = worker = None
    try:
        task = load_task(spec.task_dir)
        seal = seal_of(spec)
        if seal is not None:  # a task changed by an earlier trial stops the run before this one starts
            check_folder(seal, spec.task_dir)
        client = ctx.client(spec)
        # The harness's code runs in a confined worker (DESIGN §11.5), launched first so that its
        # imports overlap the sandbox's start and the task's setup.
        worker = await ctx.workers().acquire(spec.workspace, spec.isolation)
        sandbox = _sandbox_for(spec, task)
        await sandbox.start()
        await run_setup(task, sandbox)

        t_agent = time.monotonic()
        sres = await worker.run(ConfinedSessionSpec(
            instruction=task.instruction,
            trace_dir=spec.trial_dir,
            wall_clock_sec=spec.agent_timeout_sec or task.agent_timeout_sec,
            budget=trial_budget(spec.workspace, spec.model_requests_per_turn),
        ), client, sandbox)
        await worker.close()  # nothing the harness started outlives its session
        result.agent_duration_sec = round(time.monotonic() - t_agent, 3)
        result.stop_reason = sres.stop_reason.value
        result.turns, result.tool_calls, result.tool_errors = sres.turns, sres.tool_calls, sres.tool_errors
        result.usage = sres.usage

        if sres.stop_reason == StopReason.infra_error:
            result.error_class, result.error = "infra", sres.detail
        elif sres.stop_reason == StopReason.wall_clock:
            result.error_class, result.error = "agent_timeout", sres.detail
        else:
            t_ver = time.monotonic()
            verdict = await run_verifier(
                task if seal is None else verifier_task(task, seal, spec.task_dir),  # tests from the snapshot
                sandbox,
                spec.trial_dir / "verifier",
                spec.verifier_timeout_sec,
                pass_threshold=spec.pass_threshold,
            )
            result.verifier_duration_sec = round(time.monotonic() - t_ver, 3)
            result.raw_reward, result.rewards = verdict.reward, verdict.rewards
            if verdict.error:
                result.error_class, result.error = "verifier_error", verdict.error
            else:
                result.passed = verdict.passed
                result.reward = 1.0 if verdict.passed else 0.0
    except InfrastructureError as exc:  # sandbox failures, setup failures
        result.error_class, result.error = "infra", f"{type(exc).__name__}: {exc}"
    except (asyncio.CancelledError, TaskChanged):  # a changed task stops the run: no result is written
        raise
    except Exception as exc:  # a bug or bad input around the trial: infra, with the trace kept
        result.error_class = "infra"
        result.error = f"{type(exc).__name__}: {exc}"
        (spec.trial_dir / "error.txt").write_text(traceback.format_exc())
    finally:
        if worker is not None:
            await worker.close()
        await stop_sandbox(sandbox, spec.trial_dir)
    return write_result(spec, result, t0)


async def stop_sandbox(sandbox: Any, trial_dir: Path) -> None:
    """Stop the trial's sandbox; a failure to stop is noted beside the trial, never raised."""
    if sandbox is None:
        return
    try:
        await sandbox.stop()
    except Exception as exc:  # stopping must not hide the trial's own outcome
        (trial_dir / "sandbox-stop-error.txt").write_text(repr(exc))


def write_result(spec: TrialSpec, result: TrialResult, t0: float) -> TrialResult:
    """Close a trial: its duration, scratch removed, result.json written last (= finished)."""
    result.duration_sec = round(time.monotonic() - t0, 3)
    for scratch in SCRATCH + (() if spec.keep_app else ("app",)):
        shutil.rmtree(spec.trial_dir / scratch, ignore_errors=True)
    atomic_write_json(spec.trial_dir / RESULT_FILE, json.loads(result.model_dump_json()))
    return result
