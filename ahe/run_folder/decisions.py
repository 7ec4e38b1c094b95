"""Schemas of the decision files of an iteration: attribution.json and rollback.json.

They live here, below the loop (which writes them) and the evolve agent, audit and report
(which read them), so every reader parses the same typed model (DESIGN.md §7, §8).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Verdict = Literal["keep", "rollback", "inconclusive"]


class ChangeVerdict(BaseModel):
    change_id: str
    commit: str | None
    component: str
    verdict: Verdict
    reason: str
    predicted_fixes: list[str]
    fixes_improved: list[str]
    fixes_not_improved: list[str]
    predicted_regressions: list[str]
    regressions_happened: list[str]
    unpredicted_regressions: list[str]
    replay_at_risk: list[str] = Field(default_factory=list)  # the change's replay at record time
    replay_regressions: list[str] = Field(default_factory=list)  # regressions pinned on it by its replay


class PredictionScore(BaseModel):
    """Precision/recall of one kind of prediction, with a random predictor's expectation."""

    predicted: list[str]
    actual: list[str]
    hits: list[str]
    precision: float | None  # None when nothing was predicted
    recall: float | None  # None when nothing happened
    random_precision: float | None
    random_recall: float | None


class Attribution(BaseModel):
    """attribution.json of iteration t: the verdicts on the changes of iteration t-1."""

    iteration: int
    delta: float
    strictness: str  # the verdict policy's name (ahe.evolution.policies)
    n_tasks: int
    improved: list[str]
    regressed: list[str]
    pass_rate_before: dict[str, float]
    pass_rate_after: dict[str, float]
    changes: list[ChangeVerdict] = Field(default_factory=list)
    fix_predictions: PredictionScore
    regression_predictions: PredictionScore
    unpredicted_improvements: list[str]
    unpredicted_regressions: list[str]
    # Regression foresight (docs/foresight.md): the replay's at-risk sets scored alone and joined
    # with the agent's; None when no change of the round was replayable.
    replay_regression_predictions: PredictionScore | None = None
    union_regression_predictions: PredictionScore | None = None
    pinned_by_replay: dict[str, list[str]] = Field(default_factory=dict)  # regressed task -> change ids


class RollbackRecord(BaseModel):
    change_id: str
    commit: str  # the change's own commit
    revert_commit: str | None = None
    method: str | None = None  # "git revert" or "restore files"
    files: list[str] = Field(default_factory=list)
    reason: str
    error: str | None = None


class RollbackReport(BaseModel):
    """rollback.json of iteration t: the changes reverted after its attribution."""

    iteration: int
    base_head: str
    head: str
    rolled_back: list[RollbackRecord] = Field(default_factory=list)
