"""One trial, whatever its kind: `execute_trial` hands the spec to the kind that claims it.

The kinds (ahe/rollout/kinds.py) are the one-shot trial (one_shot.py) and the SWE-CI loop
(ci_trial.py); each writes result.json last and atomically, so its presence marks a trial
finished. The shared parts (context, sandbox, seal, result) live in trial_parts.py.
"""

from __future__ import annotations

from ahe.rollout.kinds import kind_for
from ahe.rollout.models import TrialResult, TrialSpec
from ahe.rollout.trial_parts import RESULT_FILE, SCRATCH, TrialContext, load_result, seal_of

__all__ = ["RESULT_FILE", "SCRATCH", "TrialContext", "execute_trial", "load_result", "seal_of"]


async def execute_trial(spec: TrialSpec, ctx: TrialContext) -> TrialResult:
    """Run one trial (or resume a resumable one) and write its result.json. Never raises for
    the trial's own failures; a task changed during the run (TaskChanged) stops the run."""
    return await kind_for(spec).run(spec, ctx)
