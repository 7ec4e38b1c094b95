"""What a kind of trial is, and the list the kinds register into: a leaf the kinds import
(ci_trial.py, one_shot.py), so the dispatcher (kinds.py) imports them and never the other way round."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ahe.rollout.models import TrialResult, TrialSpec
from ahe.rollout.trial_parts import TrialContext

RunTrial = Callable[[TrialSpec, TrialContext], Awaitable[TrialResult]]


@dataclass(frozen=True)
class TrialKind:
    name: str
    summary: str
    claims: Callable[[TrialSpec], bool]  # cheap: reads the task folder, never starts anything
    run: RunTrial  # runs the trial and writes result.json; never raises for the trial's failures


REGISTERED: list[TrialKind] = []  # newest first; the one-shot kind is not in it (it is always last)


def register_trial_kind(kind: TrialKind) -> TrialKind:
    """Add a kind (tried before the ones registered earlier; the one-shot kind is always last)."""
    REGISTERED.insert(0, kind)
    return kind
