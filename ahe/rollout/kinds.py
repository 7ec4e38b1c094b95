"""Kinds of trial: which code runs a trial, chosen by what the task asks for.

A kind `claims` the trials it runs (the CI loop claims tasks whose task.toml has [ci] rounds);
the first kind that claims a trial runs it, and the one-shot kind (setup, one agent session,
the verifier) runs every other. A new kind is one module and one `register_trial_kind` call
(ahe/rollout/trial_kind.py, the leaf every kind imports), not a branch at the top of every trial;
this dispatcher imports the kinds, never the other way round.
"""

from __future__ import annotations

from ahe.rollout.models import TrialSpec
from ahe.rollout.trial_kind import REGISTERED, RunTrial, TrialKind, register_trial_kind

__all__ = ["RunTrial", "TrialKind", "kind_for", "register_trial_kind", "trial_kind_names"]
_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from ahe.rollout import ci_trial  # noqa: F401 - registers the CI-loop kind


def kind_for(spec: TrialSpec) -> TrialKind:
    """The kind that runs `spec`: the first that claims it, else the one-shot kind."""
    from ahe.rollout.one_shot import ONE_SHOT

    _load()
    for kind in REGISTERED:
        if kind.claims(spec):
            return kind
    return ONE_SHOT


def trial_kind_names() -> list[str]:
    _load()
    return [k.name for k in REGISTERED] + ["one-shot"]
