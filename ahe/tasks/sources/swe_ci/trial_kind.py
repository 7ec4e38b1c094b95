"""Which kind of trial a task asks for: the CI loop when its task.toml has [ci] rounds."""

from __future__ import annotations

from typing import Any, Awaitable

from ahe.errors import ConfigError
from ahe.rollout.models import TrialResult, TrialSpec


def ci_trial_or_none(spec: TrialSpec, ctx: Any) -> Awaitable[TrialResult] | None:
    """The coroutine of a CI trial, or None for an ordinary one-shot trial."""
    from ahe.tasks.sources.swe_ci.rounds import ci_settings

    try:
        ci = ci_settings(spec.task_dir)
    except ConfigError as exc:
        return _broken(spec, str(exc))
    if ci is None:
        return None
    from ahe.tasks.sources.swe_ci.ci_trial import execute_ci_trial

    return execute_ci_trial(spec, ctx, ci)


async def _broken(spec: TrialSpec, message: str) -> TrialResult:
    """A [ci] table that does not validate: the trial ends at once with the reason."""
    import json

    from ahe.rollout.trial import RESULT_FILE
    from ahe.io import atomic_write_json

    spec.trial_dir.mkdir(parents=True, exist_ok=True)
    result = TrialResult(task=spec.task_name, trial=spec.trial, attempt=spec.attempt, error_class="infra", error=message)
    atomic_write_json(spec.trial_dir / RESULT_FILE, json.loads(result.model_dump_json()))
    return result
