"""One recorded trial through the harness before and after a change, step by step."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from evolve_agent.replay.engine import Effect, ReplaySession, differences
from evolve_agent.replay.models import StepDiff
from evolve_agent.replay.recorded import RecordedTrial

MAX_DIFFS_KEPT = 5


@dataclass
class TrialOutcome:
    trial: RecordedTrial
    diffs: list[StepDiff] = field(default_factory=list)
    steps_differing: int = 0
    steps_replayed: int = 0
    new_errors: list[tuple[str, str, str, str]] = field(default_factory=list)  # (mw, hook, error, ref)
    old_errors: set[tuple[str, str]] = field(default_factory=set)


async def _both(a: Any, b: Any, concurrent: bool) -> tuple[Effect, Effect]:
    """Both sides of a step: concurrently when they run in sandboxes, else one after the other (cheaper)."""
    if concurrent:
        ea, eb = await asyncio.gather(a, b)
        return ea, eb
    return await a, await b


def _errors(out: TrialOutcome, eo: Effect, en: Effect, ref: str) -> None:
    out.old_errors |= {(m, h) for m, h, _ in eo.errors}
    out.new_errors += [(m, h, e, ref) for m, h, e in en.errors]


async def replay_pair(old: ReplaySession, new: ReplaySession, trial: RecordedTrial, *,
                      executed: bool = False, max_steps: int | None = None) -> TrialOutcome:
    """Compare what the two harnesses do on each recorded step; stops where the new one would stop."""
    out = TrialOutcome(trial)
    turns = trial.turns[:max_steps] if max_steps else trial.turns
    if not turns:
        return out
    first_ref = trial.ref(turns[0].step)
    eo, en = await _both(old.start(trial), new.start(trial), executed)
    _errors(out, eo, en, first_ref)
    reasons = differences(eo, en, executed=executed)
    if reasons:
        out.diffs.append(StepDiff(step=turns[0].step, ref=first_ref, reasons=[f"at session start: {r}" for r in reasons]))
        if en.stop and en.stop != eo.stop:
            out.steps_differing = len(turns)  # none of the recorded steps would happen
            return out
    for i, turn in enumerate(turns):
        eo, en = await _both(old.step(trial, i), new.step(trial, i), executed)
        out.steps_replayed += 1
        ref = trial.ref(turn.step)
        _errors(out, eo, en, ref)
        reasons = differences(eo, en, executed=executed)
        if not reasons:
            continue
        if not out.diffs or out.diffs[-1].step != turn.step:
            out.diffs.append(StepDiff(step=turn.step, ref=ref, reasons=reasons))
        else:
            out.diffs[-1].reasons += reasons
        if en.stop and en.stop != eo.stop:
            out.steps_differing = len(out.diffs) + len(turns) - i - 1  # the later steps would not happen
            return out
    out.steps_differing = len(out.diffs)
    return out
