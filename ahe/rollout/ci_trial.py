"""The CI-loop trial kind: a task whose task.toml has [ci] rounds (SWE-CI, docs/swe-ci.md).

The rounds themselves are `ahe.tasks.sources.swe_ci.ci_loop`; this module gives them a
sandbox, the harness and the Architect, and writes result.json like any trial (last, so its
presence still marks the trial finished). Unlike a one-shot trial, a half-finished CI trial is
not re-run from scratch: it resumes at its first unfinished round.
"""

from __future__ import annotations

import asyncio
import json
import time
import traceback

from ahe.errors import ConfigError, InfrastructureError
from ahe.io import atomic_write_json
from ahe.rollout.trial_kind import TrialKind, register_trial_kind
from ahe.rollout.models import TrialResult, TrialSpec
from ahe.rollout.trial_parts import RESULT_FILE, TrialContext, sandbox_for, seal_of, stop_sandbox, write_result
from ahe.runtime.trace import now_iso
from ahe.tasks.snapshot import TaskChanged
from ahe.tasks.sources.swe_ci import ci_loop
from ahe.tasks.sources.swe_ci.layout import CISettings
from ahe.tasks.sources.swe_ci.rounds import ci_settings, final_rewards


def _ci_of(spec: TrialSpec) -> CISettings | str | None:
    """The task's [ci] settings; the reason when its [ci] table does not validate; None without one."""
    try:
        return ci_settings(spec.task_dir)
    except ConfigError as exc:
        return str(exc)


def is_ci_trial(spec: TrialSpec) -> bool:
    return _ci_of(spec) is not None


async def run_ci_trial(spec: TrialSpec, ctx: TrialContext) -> TrialResult:
    """A CI trial, or its one-sentence failure when its [ci] table is broken."""
    ci = _ci_of(spec)
    if isinstance(ci, str) or ci is None:
        return await _broken(spec, ci or f"{spec.task_dir}: task.toml has no [ci] table")
    return await execute_ci_trial(spec, ctx, ci)


async def _broken(spec: TrialSpec, message: str) -> TrialResult:
    """A [ci] table that does not validate: the trial ends at once with the reason."""
    spec.trial_dir.mkdir(parents=True, exist_ok=True)
    result = TrialResult(task=spec.task_name, trial=spec.trial, attempt=spec.attempt, error_class="infra", error=message)
    atomic_write_json(spec.trial_dir / RESULT_FILE, json.loads(result.model_dump_json()))
    return result


def _totals(result: TrialResult, records: list) -> None:
    """Tokens, turns and tool calls of every round, those of an earlier (killed) process too."""
    for r in records:
        result.usage = result.usage.add(r.usage)
        result.turns += r.turns
        result.tool_calls += r.tool_calls
        result.tool_errors += r.tool_errors
    if records:
        result.stop_reason = records[-1].programmer_stop


async def execute_ci_trial(spec: TrialSpec, ctx: TrialContext, ci: CISettings) -> TrialResult:
    """Run (or resume) one CI trial and write its result.json. Never raises for trial failures."""
    from ahe.runtime import load_agent
    from ahe.tasks import load_task, run_setup
    from ahe.tasks.snapshot import verifier_task

    t0 = time.monotonic()
    done = ci_loop.finished_rounds(spec.trial_dir)
    ci_loop.keep_finished(spec.trial_dir, len(done))
    result = TrialResult(task=spec.task_name, trial=spec.trial, attempt=spec.attempt, started_at=now_iso())
    sandbox = None
    try:
        live = load_task(spec.task_dir)
        seal = seal_of(spec)  # the rounds' verifier and expected counts come from the sealed snapshot
        task = live if seal is None else verifier_task(live, seal, spec.task_dir)
        expected_file = task.tests_dir / "expected.json"
        if not expected_file.is_file():
            raise ConfigError(f"{expected_file}: missing; a [ci] task needs the counts of its base and target "
                              "(make it with `ahe tasks make swe-ci` or `ahe tasks import swe-ci`).")
        expected = json.loads(expected_file.read_text())
        sandbox = sandbox_for(spec, live)
        env = ci_loop.LoopEnv(
            task=task, sandbox=sandbox, programmer=spec.workspace, isolation=spec.isolation,
            architect=load_agent(ci_loop.ARCHITECT_WORKSPACE), client=ctx.client(spec), trial_dir=spec.trial_dir,
            backend=ctx.backend(spec), model_requests_per_turn=spec.model_requests_per_turn,
            ci=ci, expected=expected, session_wall_sec=spec.agent_timeout_sec or task.agent_timeout_sec,
            verifier_timeout_sec=spec.verifier_timeout_sec, pass_threshold=spec.pass_threshold,
        )
        await sandbox.start()
        await run_setup(live, sandbox)
        t_agent = time.monotonic()
        records = await ci_loop.run_rounds(env, done, f"{spec.task_name}-{spec.trial}")
        result.agent_duration_sec = round(time.monotonic() - t_agent, 3)
        _totals(result, records)
        if seal is not None:  # the rounds ran harness code between verifiers: was anything rewritten?
            verifier_task(live, seal, spec.task_dir)
        rewards = final_rewards(records, ci, expected)
        atomic_write_json(spec.trial_dir / "verifier" / "reward.json", rewards)
        result.raw_reward, result.rewards = rewards["reward"], rewards
        result.passed = rewards["reward"] >= spec.pass_threshold
        result.reward = 1.0 if result.passed else 0.0
    except ConfigError as exc:
        result.error_class, result.error = "infra", str(exc)
    except ci_loop.RoundFailed as exc:
        result.error_class, result.error = exc.error_class, str(exc)  # type: ignore[assignment]
    except InfrastructureError as exc:
        result.error_class, result.error = "infra", f"{type(exc).__name__}: {exc}"
    except (asyncio.CancelledError, TaskChanged):  # a changed task stops the run: no result is written
        raise
    except Exception as exc:  # a bug or bad input around the trial: infra, with the trace kept
        result.error_class, result.error = "infra", f"{type(exc).__name__}: {exc}"
        (spec.trial_dir / "error.txt").write_text(traceback.format_exc())
    finally:
        await stop_sandbox(sandbox, spec.trial_dir)
    return write_result(spec, result, t0)


CI_LOOP = register_trial_kind(TrialKind(
    name="ci-loop", summary="SWE-CI: Architect and programmer rounds on a live codebase, resumable per round",
    claims=is_ci_trial, run=run_ci_trial))
