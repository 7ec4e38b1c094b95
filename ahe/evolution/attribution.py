"""Attribution: did each change's predictions hold? (DESIGN.md §8)

A task *improved* when its pass rate rose by at least δ between the iteration that
evaluated the harness before the changes and the one that evaluated it after; it
*regressed* when it fell by at least δ. Each accepted change is judged by the policy below;
each iteration gets precision and recall of fix and regression predictions, each beside
the expected value of a random predictor that names as many tasks.

Verdict policy (`strictness`):

- A change **holds** when at least one of its predicted fixes improved.
- *lenient*: `rollback` only when nothing it predicted to fix improved **and** some task
  regressed (one it named as a risk, or one nobody predicted); otherwise `keep` (or
  `inconclusive` when nothing it predicted moved and nothing regressed).
- *balanced* (default): as lenient, and also `rollback` when more of its predicted risks
  materialised than its predicted fixes held (a net loss).
- *strict*: `keep` only when a predicted fix improved and no regression happened at all;
  anything else is `rollback`.

Regressions nobody predicted cannot be pinned on one change, so they count against every
change whose own predictions did not hold (a change whose fix held is not blamed for them
under lenient and balanced).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ahe.harness.manifest import ChangeEntry

Verdict = Literal["keep", "rollback", "inconclusive"]
Strictness = Literal["lenient", "balanced", "strict"]


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
    iteration: int
    delta: float
    strictness: Strictness
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


def flips(before: dict[str, float], after: dict[str, float], delta: float) -> tuple[list[str], list[str]]:
    """(improved, regressed) among tasks evaluated in both iterations."""
    common = sorted(set(before) & set(after))
    eps = 1e-9
    improved = [t for t in common if after[t] - before[t] >= delta - eps]
    regressed = [t for t in common if before[t] - after[t] >= delta - eps]
    return improved, regressed


def score(predicted: set[str], actual: set[str], n: int) -> PredictionScore:
    hits = predicted & actual
    return PredictionScore(
        predicted=sorted(predicted),
        actual=sorted(actual),
        hits=sorted(hits),
        precision=len(hits) / len(predicted) if predicted else None,
        recall=len(hits) / len(actual) if actual else None,
        # a predictor naming |predicted| of the n tasks uniformly at random:
        random_precision=len(actual) / n if predicted and n else None,
        random_recall=min(1.0, len(predicted) / n) if actual and n else None,
    )


def _verdict(
    c: ChangeEntry, improved: set[str], regressed: set[str], unpredicted_reg: list[str], strictness: Strictness
) -> ChangeVerdict:
    fixes_ok = [t for t in c.predicted_fixes if t in improved]
    fixes_missed = [t for t in c.predicted_fixes if t not in improved]
    risks_hit = [t for t in c.predicted_regressions if t in regressed]
    holds = bool(fixes_ok)
    reasons: list[str] = []
    if c.predicted_fixes and not holds:
        reasons.append("predicted fix did not improve")
    if risks_hit:
        reasons.append("predicted regression of " + ", ".join(risks_hit))
    blamed = unpredicted_reg if (not holds or strictness == "strict") else []
    if blamed:
        reasons.append("unpredicted regression of " + ", ".join(blamed))
    any_regression = bool(risks_hit or blamed)

    if strictness == "strict":
        verdict: Verdict = "keep" if holds and not any_regression and not unpredicted_reg else "rollback"
    elif not holds:
        verdict = "rollback" if any_regression else "inconclusive"
    elif strictness == "balanced" and len(risks_hit) > len(fixes_ok):
        verdict = "rollback"
        reasons.append(f"{len(risks_hit)} predicted risks happened against {len(fixes_ok)} fixes")
    else:
        verdict = "keep"
    if verdict == "keep":
        reasons.insert(0, "predicted fix improved: " + ", ".join(fixes_ok))
    elif verdict == "inconclusive" and not reasons:
        reasons.append("predicted nothing measurable" if not c.predicted_fixes else "no effect either way")
    elif verdict == "inconclusive":
        reasons.append("nothing regressed")
    return ChangeVerdict(
        change_id=c.id,
        commit=c.commit,
        component=c.component,
        verdict=verdict,
        reason="; ".join(reasons),
        predicted_fixes=list(c.predicted_fixes),
        fixes_improved=fixes_ok,
        fixes_not_improved=fixes_missed,
        predicted_regressions=list(c.predicted_regressions),
        regressions_happened=risks_hit,
        unpredicted_regressions=blamed,
    )


def attribute(
    changes: list[ChangeEntry],
    before: dict[str, float],
    after: dict[str, float],
    *,
    iteration: int,
    delta: float = 0.5,
    strictness: Strictness = "balanced",
) -> Attribution:
    """Judge the accepted `changes` of the previous iteration against the flips they caused."""
    improved, regressed = flips(before, after, delta)
    n = len(set(before) & set(after))
    pred_fix = {t for c in changes for t in c.predicted_fixes}
    pred_reg = {t for c in changes for t in c.predicted_regressions}
    unpred_imp = [t for t in improved if t not in pred_fix]
    unpred_reg = [t for t in regressed if t not in pred_reg]
    verdicts = [_verdict(c, set(improved), set(regressed), unpred_reg, strictness) for c in changes]
    return Attribution(
        iteration=iteration,
        delta=delta,
        strictness=strictness,
        n_tasks=n,
        improved=improved,
        regressed=regressed,
        pass_rate_before=before,
        pass_rate_after=after,
        changes=verdicts,
        fix_predictions=score(pred_fix, set(improved), n),
        regression_predictions=score(pred_reg, set(regressed), n),
        unpredicted_improvements=unpred_imp,
        unpredicted_regressions=unpred_reg,
    )
