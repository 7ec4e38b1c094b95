"""Attribution: did each change's predictions hold? (DESIGN.md §8)

A task *improved* when its pass rate rose by at least δ between the iteration that
evaluated the harness before the changes and the one that evaluated it after; it
*regressed* when it fell by at least δ. Each accepted change is judged by the policy below;
each iteration gets precision and recall of fix and regression predictions, each beside
the expected value of a random predictor that names as many tasks.

Each change is judged by the verdict policy named by `strictness` (ahe.evolution.policies:
`paper` — the default, the paper's δ-flip rule — `lenient`, `strict`, or one registered by
a plugin); this module computes the evidence and the prediction scores around it.

Regression foresight (docs/foresight.md): a regression whose recorded steps a change's replay
altered is pinned on that change (`RoundEvidence.pinned_by_replay`): it counts as a
materialised risk of that change and is not blamed on the others. Regression predictions are
scored three ways: the agent's, the replay's (`replay_at_risk`), and their union.
"""

from __future__ import annotations

from collections.abc import Mapping

from ahe.evolution.metric import PASS_RATE, task_scores
from ahe.evolution.policies import RoundEvidence, TaskEvidence
from ahe.evolution.registry import get_policy
from ahe.evolution.scoring import score  # noqa: F401 (its old home)
from ahe.harness.manifest import ChangeEntry
from ahe.rollout.models import RunResults
from ahe.run_folder.decisions import Attribution


def flips(before: dict[str, float], after: dict[str, float], delta: float) -> tuple[list[str], list[str]]:
    """(improved, regressed) among tasks evaluated in both iterations."""
    common = sorted(set(before) & set(after))
    eps = 1e-9
    improved = [t for t in common if after[t] - before[t] >= delta - eps]
    regressed = [t for t in common if before[t] - after[t] >= delta - eps]
    return improved, regressed


def replay_touched(c: ChangeEntry) -> set[str]:
    """The tasks whose recorded steps the change's replay altered (passing or not)."""
    return set(c.replay_at_risk) | set(c.replay.tasks_touched if c.replay is not None else ())


def task_evidence(before: RunResults, after: RunResults, metric: str = PASS_RATE) -> dict[str, TaskEvidence]:
    """Per-task successes/trials on both sides, for tasks with trials in both iterations.

    With a reward-key `metric` the rates are that key's per-task means (no counts: they are
    not successes out of trials).
    """
    if metric != PASS_RATE:
        b_scores, a_scores = task_scores(before, metric), task_scores(after, metric)
        return {t: TaskEvidence(task=t, before_rate=b_scores[t], after_rate=a_scores[t])
                for t in sorted(set(b_scores) & set(a_scores))}
    out = {}
    for name in sorted(set(before.tasks) & set(after.tasks)):
        b, a = before.tasks[name], after.tasks[name]
        if b.trials and a.trials:
            out[name] = TaskEvidence(task=name, before_rate=b.pass_rate, after_rate=a.pass_rate,
                                     before_passed=b.passed, before_trials=b.trials,
                                     after_passed=a.passed, after_trials=a.trials)
    return out


def attribute(
    changes: list[ChangeEntry],
    before: Mapping[str, float] | RunResults,
    after: Mapping[str, float] | RunResults,
    *,
    iteration: int,
    delta: float = 0.5,
    strictness: str = "paper",
    metric: str = PASS_RATE,
) -> Attribution:
    """Judge the accepted `changes` of the previous iteration by the policy `strictness`.

    `before`/`after` are the results of the iterations that evaluated the harness without
    and with the changes (or, for callers that only have them, pass rates per task).
    """
    policy = get_policy(strictness)
    if isinstance(before, RunResults) and isinstance(after, RunResults):
        tasks = task_evidence(before, after, metric)
    else:
        assert not isinstance(before, RunResults) and not isinstance(after, RunResults)
        tasks = {t: TaskEvidence(task=t, before_rate=before[t], after_rate=after[t]) for t in sorted(set(before) & set(after))}
    rate_before = {t: e.before_rate for t, e in tasks.items()}
    rate_after = {t: e.after_rate for t, e in tasks.items()}
    improved, regressed = flips(rate_before, rate_after, delta)
    n = len(tasks)
    pred_fix = {t for c in changes for t in c.predicted_fixes}
    pred_reg = {t for c in changes for t in c.predicted_regressions}
    replay_reg = {t for c in changes for t in c.replay_at_risk}
    pinned = {t: ids for t in regressed if (ids := [c.id for c in changes if t in replay_touched(c)])}
    unpred_imp = [t for t in improved if t not in pred_fix]
    unpred_reg = [t for t in regressed if t not in pred_reg]
    evidence = RoundEvidence(iteration=iteration, delta=delta, tasks=tasks, improved=improved, regressed=regressed,
                             changes=list(changes), unpredicted_regressions=[t for t in unpred_reg if t not in pinned],
                             pinned_by_replay=pinned)
    replayed = any(c.replay is not None and c.replay.replayable for c in changes)
    return Attribution(
        iteration=iteration,
        delta=delta,
        strictness=strictness,
        metric=metric,
        n_tasks=n,
        improved=improved,
        regressed=regressed,
        pass_rate_before=rate_before,
        pass_rate_after=rate_after,
        changes=[policy.judge(c, evidence) for c in changes],
        fix_predictions=score(pred_fix, set(improved), n),
        regression_predictions=score(pred_reg, set(regressed), n),
        unpredicted_improvements=unpred_imp,
        unpredicted_regressions=unpred_reg,
        replay_regression_predictions=score(replay_reg, set(regressed), n) if replayed else None,
        union_regression_predictions=score(pred_reg | replay_reg, set(regressed), n) if replayed else None,
        pinned_by_replay=pinned,
    )
