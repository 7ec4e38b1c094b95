"""pass@1, tokens per trial and successes per million tokens, overall and by difficulty.

Computed as the paper does: pass@1 is the mean binary reward over every trial (an
infrastructure-aborted trial counts as 0), while token figures leave infra-aborted trials
out — a trial the endpoint or sandbox killed says nothing about what the harness costs.
Succ/Mtok = passed trials × 10⁶ / tokens of the trials that ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ahe.rollout.models import TrialResult
from ahe.rollout.trial import load_result

DIFFICULTIES = ("easy", "medium", "hard")
UNKNOWN = "unknown"


def load_trials(eval_dir: Path) -> list[TrialResult]:
    """Every finished trial of a rollout folder (`<eval_dir>/rollouts/<task>/trial-<n>/result.json`)."""
    root = Path(eval_dir) / "rollouts"
    if not root.is_dir():
        return []
    out = []
    for trial_dir in sorted(root.glob("*/trial-*")):
        r = load_result(trial_dir)
        if r is not None:
            out.append(r)
    return out


def task_difficulty(tasks_dir: Path | None, include: list[str] | None = None) -> dict[str, str]:
    """Task name → difficulty from task.toml's [metadata] (lower-cased; "unknown" when absent)."""
    if tasks_dir is None or not Path(tasks_dir).is_dir():
        return {}
    from ahe.tasks import load_tasks

    loaded = load_tasks(tasks_dir, include=include or None)
    return {t.name: (t.difficulty or UNKNOWN).lower() for t in loaded.tasks}


def _block(trials: list[TrialResult]) -> dict:
    ran = [t for t in trials if t.error_class != "infra"]
    tokens = sum(t.usage.total_tokens for t in ran)
    passed = sum(t.passed for t in trials)
    return {
        "trials": len(trials),
        "passed": passed,
        "infra_errors": len(trials) - len(ran),
        "pass_at_1": passed / len(trials) if trials else None,
        "tokens": tokens,
        "tokens_per_trial": tokens / len(ran) if ran else None,
        "successes_per_mtok": passed * 1e6 / tokens if tokens else None,
    }


def side_metrics(trials: Iterable[TrialResult], difficulty: dict[str, str] | None = None) -> dict:
    """Overall and per-difficulty blocks, and each task's pass rate."""
    trials = list(trials)
    difficulty = difficulty or {}
    by: dict[str, list[TrialResult]] = {}
    per_task: dict[str, list[TrialResult]] = {}
    for t in trials:
        by.setdefault(difficulty.get(t.task, UNKNOWN), []).append(t)
        per_task.setdefault(t.task, []).append(t)
    order = [d for d in DIFFICULTIES if d in by] + sorted(d for d in by if d not in DIFFICULTIES)
    return {
        **_block(trials),
        "by_difficulty": {d: _block(by[d]) for d in order},
        "per_task": {name: sum(t.passed for t in ts) / len(ts) for name, ts in sorted(per_task.items())},
    }
