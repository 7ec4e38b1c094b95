"""Schemas of the decision files of an iteration: attribution.json and rollback.json.

They live here, below the loop (which writes them) and the evolve agent, audit and report
(which read them), so every reader parses the same typed model (DESIGN.md §7, §8).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Verdict = Literal["keep", "rollback", "inconclusive", "deferred"]
Movement = Literal["up", "down", "none"]


class TaskEvidenceRecord(BaseModel):
    """What the noise-aware policy knew about one task (docs/decisions.md)."""

    task: str
    before: tuple[int, int]  # (successes, trials) on the round's base harness, history pooled in
    after: tuple[int, int]  # (successes, trials) on the round's head harness
    history_trials: int = 0  # of `before`, trials from earlier rounds judged to be about the same harness
    reeval_trials: int = 0  # re-evaluation trials spent on this task this round (both sides and without-c)
    p_up: float  # posterior P(pass rate after > before)
    movement: Movement
    flaky: bool = False  # both outcomes seen on one harness
    attributed_to: list[str] = Field(default_factory=list)
    how: str = ""  # how the movement was pinned on a change (or why it was not)


class WatchEvidence(BaseModel):
    """A deferred change's evidence on one watched task: the harness with it against without it."""

    task: str
    with_change: tuple[int, int]  # (successes, trials) on this round's base, which carries it (fresh trials only)
    without: tuple[int, int]  # (successes, trials) on this round's base without it (history pooled in)
    p_up: float  # posterior P(pass rate with > without)


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
    confidence: float | None = None  # statistical policies: probability that the verdict is right
    touched_tasks: list[str] = Field(default_factory=list)  # statistical policies: tasks this change was found to move
    # noise policy, deferred verdicts (docs/decisions.md): the change stays provisionally and is judged again
    change_iteration: int | None = None  # the iteration that made the change, when not the round's own (a re-judgement)
    deferred_rounds: int = 0  # how many attributions have deferred it so far (this one included when deferred)
    watch_tasks: list[str] = Field(default_factory=list)  # tasks its evidence is awaited on while deferred
    watch_evidence: list["WatchEvidence"] = Field(default_factory=list)  # with it vs without it, per watched task


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
    metric: str = "pass_rate"  # what flipped: the pass rate or a reward key's per-task mean
    n_tasks: int
    improved: list[str]
    regressed: list[str]
    pass_rate_before: dict[str, float]  # per task, the value of `metric` (the pass rate by default)
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
    evidence: list[TaskEvidenceRecord] = Field(default_factory=list)  # noise policy: tasks with any signal
    reeval: "ReevalSummary | None" = None  # noise policy: the targeted re-evaluation of this round
    rejudged: list[ChangeVerdict] = Field(default_factory=list)  # noise policy: earlier deferred changes judged again


class ReevalHarness(BaseModel):
    commit: str
    state: list[str]  # the changes present ("NNN/chg-k"), so later rounds can pool these trials


class BestCandidate(BaseModel):
    round: int  # the iteration that evaluated it (the last iteration for the harness after its rollback)
    commit: str
    state: list[str]
    estimate: float  # estimated pass@1 from all pooled evidence about it


LATEST_REASON = "the latest harness: every change in it was judged again this round on every harness the run evaluated"
"""BestDecision.reason when a policy's H_best is the harness its decisions left (no contest: `ahe audit` says so)."""


class BestDecision(BaseModel):
    """H_best without the winner's curse: how the best harness was declared after this rollback."""

    candidates: list[BestCandidate]  # distinct harnesses, best first
    leader_before: str | None = None  # commit of the harness the pooled evidence rated best before re-evaluation
    best_round: int  # the harness declared best: the round that evaluated it, its commit
    best_commit: str
    runner_up: str | None = None  # commit of the runner-up
    tasks: list[str] = Field(default_factory=list)  # tasks where best and runner-up differ
    reeval_tasks: list[str] = Field(default_factory=list)  # of those, the ones re-run on both harnesses
    p_lead: float | None = None  # posterior P(best's pass@1 on those tasks > runner-up's)
    decisive: bool = False  # p_lead reached the verdict threshold (0.9)
    budget: int = 0  # re-evaluation trials left to it by the attribution of this iteration
    spent: int = 0
    run_now: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    reason: str = ""
    harnesses: dict[str, ReevalHarness] = Field(default_factory=dict)  # tag -> harness of its trials


class ReevalSummary(BaseModel):
    """reeval.json of iteration t: what targeted re-evaluation spent and on which harnesses."""

    budget: int
    spent: int  # trials asked for (run now or found finished)
    run_now: int  # trials run in the session that finished the phase
    tokens: int = 0
    cost_usd: float = 0.0
    prior: tuple[float, float] | None = None  # the Beta prior fitted to the run's tasks
    harnesses: dict[str, ReevalHarness] = Field(default_factory=dict)  # tag -> harness
    best: BestDecision | None = None  # H_best's re-evaluation after this iteration's rollback (trials not in `spent`)


class RollbackRecord(BaseModel):
    change_id: str
    change_iteration: int | None = None  # the iteration that made it, when not the judged round's (a deferred change)
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


class VariantRecord(BaseModel):
    n: int
    branch: str
    head_commit: str | None = None
    accepted: list[str] = Field(default_factory=list)  # change ids that passed the gate
    rejected: list[str] = Field(default_factory=list)
    pass_at_1: float | None = None
    n_trials: int = 0
    tokens_per_trial: float | None = None
    successes_per_mtok: float | None = None
    evolve_tokens: int = 0
    rollout_tokens: int = 0
    infra_error: str | None = None
    chosen: bool = False


class VariantsReport(BaseModel):
    """iterations/NNN/variants/variants.json: best-of-N of one round (docs/variants.md)."""

    iteration: int
    base_commit: str
    rule: str
    chosen: int | None = None
    reason: str = ""
    variants: list[VariantRecord] = Field(default_factory=list)


Attribution.model_rebuild()
