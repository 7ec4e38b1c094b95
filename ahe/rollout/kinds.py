"""Kinds of trial: which code runs a trial, chosen by what the task asks for.

A kind `claims` the trials it runs (the CI loop claims tasks whose task.toml has [ci] rounds);
the first kind that claims a trial runs it, and the one-shot kind (setup, one agent session,
the verifier) runs every other. A new kind is one module and one `register_trial_kind` call,
not a branch at the top of every trial.
"""

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


_KINDS: list[TrialKind] = []
_loaded = False


def register_trial_kind(kind: TrialKind) -> TrialKind:
    """Add a kind (tried before the ones registered earlier; the one-shot kind is always last)."""
    _KINDS.insert(0, kind)
    return kind


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from ahe.rollout import ci_trial  # noqa: F401 - registers the CI-loop kind


def kind_for(spec: TrialSpec) -> TrialKind:
    """The kind that runs `spec`: the first that claims it, else the one-shot kind."""
    from ahe.rollout.one_shot import ONE_SHOT

    _load()
    for kind in _KINDS:
        if kind.claims(spec):
            return kind
    return ONE_SHOT


def trial_kind_names() -> list[str]:
    _load()
    return [k.name for k in _KINDS] + ["one-shot"]
