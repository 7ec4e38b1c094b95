"""What the loop optimizes: the pass rate (the paper's) or the mean of one reward key.

`metric: evoscore` in the experiment config makes attribution compare each task's mean
`evoscore` between iterations (δ in EvoScore's units) and makes H_best the harness with the
highest run mean of it; `pass_rate` (the default) is the paper's rule. The values come from
results.json: `TaskSummary.pass_rate` / `RunResults.pass_at_1`, or `reward_means[key]`.
"""

from __future__ import annotations

from ahe.errors import ConfigError
from ahe.rollout.models import RunResults

PASS_RATE = "pass_rate"


def _check(results: RunResults, metric: str) -> None:
    """A metric no trial reported is a typo, not a zero: say which keys there are."""
    keys = sorted(set(results.reward_means) | {k for t in results.tasks.values() for k in t.reward_means})
    if keys and metric not in keys:
        raise ConfigError(
            f"metric {metric!r} is not a reward key of this run's trials ({', '.join(keys)}); "
            f"set metric to one of them or to {PASS_RATE}."
        )


def task_scores(results: RunResults, metric: str = PASS_RATE) -> dict[str, float]:
    """Per task (with at least one trial): its pass rate, or its mean of the reward key."""
    if metric == PASS_RATE:
        return {t: s.pass_rate for t, s in results.tasks.items() if s.trials}
    _check(results, metric)
    return {t: s.reward_means.get(metric, 0.0) for t, s in results.tasks.items() if s.trials}


def run_score(results: RunResults, metric: str = PASS_RATE) -> float:
    """The run's value for H_best: pass@1, or the mean of the reward key over all trials."""
    if metric == PASS_RATE:
        return results.pass_at_1
    _check(results, metric)
    return results.reward_means.get(metric, 0.0)


def label(metric: str) -> str:
    return "pass@1" if metric == PASS_RATE else f"mean {metric}"
