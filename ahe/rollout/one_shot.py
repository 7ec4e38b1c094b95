"""The one-shot trial: fresh sandbox, the task's setup, one agent session, the verifier, result.json.

The session is run by the harness's agent backend (ahe/agents: AHE's runtime, mini-swe-agent, a
command-line agent), always confined and behind the model gateway. Failures of the world (model
endpoint, sandbox, task setup) are classified `infra`, apart from the agent's own failures, so
they can be counted on their own and retried. A half-finished trial is re-run from scratch.
"""

from __future__ import annotations

import asyncio
import shutil
import time
import traceback

from ahe.agents import AgentRequest
from ahe.confine.host import worker_mode
from ahe.errors import InfrastructureError
from ahe.rollout.trial_kind import TrialKind
from ahe.rollout.models import TrialResult, TrialSpec
from ahe.rollout.trial_parts import TrialContext, sandbox_for, seal_of, stop_sandbox, write_result
from ahe.runtime.trace import now_iso
from ahe.tasks.snapshot import TaskChanged


async def execute_one_shot(spec: TrialSpec, ctx: TrialContext) -> TrialResult:
    """Run one trial from scratch and write its result.json. Never raises for trial failures."""
    from ahe.tasks import load_task, run_setup
    from ahe.tasks.snapshot import check_folder

    t0 = time.monotonic()
    if spec.trial_dir.exists():
        shutil.rmtree(spec.trial_dir)  # a half-finished trial is re-run from scratch
    spec.trial_dir.mkdir(parents=True)
    result = TrialResult(task=spec.task_name, trial=spec.trial, attempt=spec.attempt, started_at=now_iso())
    sandbox = backend = warmed = None
    try:
        task = load_task(spec.task_dir)
        seal = seal_of(spec)
        if seal is not None:  # a task changed by an earlier trial stops the run before this one starts
            check_folder(seal, spec.task_dir)
        client = ctx.client(spec)
        backend = ctx.backend(spec)
        # The backend's jail starts first, so that its imports overlap the sandbox's start and setup;
        # beside a docker sandbox it is a container of its own (docs/confinement.md).
        sandbox = sandbox_for(spec, task)
        warmed = await backend.warm(spec.workspace, worker_mode(spec.isolation, sandbox))
        await sandbox.start()
        await run_setup(task, sandbox)

        t_agent = time.monotonic()
        request = AgentRequest(harness=spec.workspace, instruction=task.instruction, trace_dir=spec.trial_dir,
                               client=client, sandbox=sandbox, isolation=spec.isolation,
                               wall_clock_sec=spec.agent_timeout_sec or task.agent_timeout_sec, warm=warmed,
                               model_requests_per_turn=spec.model_requests_per_turn)
        warmed = None  # the session owns it now
        sres = await backend.run(request)
        _trajectory_or_rebuilt(spec, sres)
        result.agent_duration_sec = round(time.monotonic() - t_agent, 3)
        _take_session(result, sres)
        if result.error_class is None:
            await _verify(spec, task, seal, sandbox, result)
    except InfrastructureError as exc:  # sandbox failures, setup failures
        result.error_class, result.error = "infra", f"{type(exc).__name__}: {exc}"
    except (asyncio.CancelledError, TaskChanged):  # a changed task stops the run: no result is written
        raise
    except Exception as exc:  # a bug or bad input around the trial: infra, with the trace kept
        result.error_class = "infra"
        result.error = f"{type(exc).__name__}: {exc}"
        (spec.trial_dir / "error.txt").write_text(traceback.format_exc())
    finally:
        if backend is not None and warmed is not None:
            await backend.discard(warmed)
        await stop_sandbox(sandbox, spec.trial_dir)
    return write_result(spec, result, t0)


def _trajectory_or_rebuilt(spec: TrialSpec, sres) -> None:
    """A backend that wrote no trajectory.json gets the one the gateway's record gives (docs/backends.md):
    the debugger reads every trial the same way, whichever agent ran."""
    from ahe.confine.host import write_gateway_trajectory

    if not (spec.trial_dir / "trajectory.json").is_file():
        path = write_gateway_trajectory(spec.trial_dir, sres)
        if path is not None and sres.trajectory_path is None:
            sres.trajectory_path = str(path)


def _take_session(result: TrialResult, sres) -> None:
    """The session's stop reason, counts and (gateway-metered) usage; its failure class, if any."""
    from ahe.runtime import StopReason

    result.stop_reason = sres.stop_reason.value
    result.stop_detail = (sres.detail or "")[:1000] or None
    result.turns, result.tool_calls, result.tool_errors = sres.turns, sres.tool_calls, sres.tool_errors
    result.usage = sres.usage
    if sres.stop_reason == StopReason.infra_error:
        result.error_class, result.error = "infra", sres.detail
    elif sres.stop_reason == StopReason.wall_clock:
        result.error_class, result.error = "agent_timeout", sres.detail


async def _verify(spec: TrialSpec, task, seal, sandbox, result: TrialResult) -> None:
    """The verifier, its tests from the sealed snapshot (never the live folder) when there is one."""
    from ahe.tasks import run_verifier
    from ahe.tasks.snapshot import verifier_task

    t_ver = time.monotonic()
    verdict = await run_verifier(
        task if seal is None else verifier_task(task, seal, spec.task_dir),
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


ONE_SHOT = TrialKind(name="one-shot", summary="setup, one agent session, the verifier", claims=lambda spec: True,
                     run=execute_one_shot)
