"""pass@1 and the unbiased pass@k estimator, and results.json from trial results."""

from __future__ import annotations

from math import comb
from statistics import mean

from ahe.llm.types import Usage
from ahe.rollout.models import RunResults, TaskSummary, TrialResult


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimator of pass@k from n trials with c successes (Chen et al., 2021)."""
    if n <= 0:
        return 0.0
    k = min(k, n)
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def reward_means(trials: list[TrialResult]) -> dict[str, float]:
    """Mean of each reward key over `trials`; a trial that did not report a key counts 0."""
    keys = sorted({k for r in trials for k in r.rewards})
    if not trials:
        return {}
    return {k: sum(r.rewards.get(k, 0.0) for r in trials) / len(trials) for k in keys}


def summarize(results: list[TrialResult], *, k: int, expected: dict[str, int] | None = None) -> RunResults:
    """Aggregate trials. `expected` (task → trials planned) lets a partial run report what is missing."""
    by_task: dict[str, list[TrialResult]] = {}
    for r in results:
        by_task.setdefault(r.task, []).append(r)
    for name in expected or {}:
        by_task.setdefault(name, [])
    tasks: dict[str, TaskSummary] = {}
    total_usage = Usage()
    for name in sorted(by_task):
        trials = sorted(by_task[name], key=lambda r: r.trial)
        rewards = [1.0 if r.passed else 0.0 for r in trials]
        n, c = len(trials), sum(1 for r in trials if r.passed)
        for r in trials:
            total_usage = total_usage.add(r.usage)
        tasks[name] = TaskSummary(
            task=name,
            trials=n,
            passed=c,
            pass_rate=c / n if n else 0.0,
            pass_at_k=pass_at_k(n, c, k),
            rewards=rewards,
            infra_errors=sum(r.error_class == "infra" for r in trials),
            timeouts=sum(r.error_class == "agent_timeout" for r in trials),
            verifier_errors=sum(r.error_class == "verifier_error" for r in trials),
            mean_tokens=mean([r.usage.total_tokens for r in trials]) if trials else 0.0,
            mean_duration_sec=mean([r.duration_sec for r in trials]) if trials else 0.0,
            reward_means=reward_means(trials),
        )
    n_trials = len(results)
    n_passed = sum(r.passed for r in results)
    planned = sum((expected or {}).values())
    scored = [t for t in tasks.values() if t.trials]
    return RunResults(
        k=k,
        tasks=tasks,
        n_trials=n_trials,
        n_passed=n_passed,
        pass_at_1=n_passed / n_trials if n_trials else 0.0,
        pass_at_k=mean([t.pass_at_k for t in scored]) if scored else 0.0,
        infra_errors=sum(t.infra_errors for t in tasks.values()),
        timeouts=sum(t.timeouts for t in tasks.values()),
        verifier_errors=sum(t.verifier_errors for t in tasks.values()),
        missing_trials=max(0, planned - n_trials),
        usage=total_usage,
        mean_tokens_per_trial=total_usage.total_tokens / n_trials if n_trials else 0.0,
        duration_sec=round(sum(r.duration_sec for r in results), 3),
        reward_means=reward_means(results),
    )
