"""The statistics of the expected-value policy (docs/decisions.md): a task's spike-and-slab effect,
the expected loss of a decision, and the keep bar. Kept apart so the policy's round logic and its
re-judgement of earlier keeps (`ev_keeps`) share one model."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.special import betaln

from ahe.evolution.evidence import Counts, Prior

EFFECT_SD = 0.3  # prior spread of a moved task's effect around the run's learned mean effect
OPEN_BAR = 0.25  # keep while P(effect > cost) is at least this and a later round will judge it again


def keep_bar(final: bool) -> float:
    """The posterior probability that a change beats the clutter cost needed to keep it. At the last
    look it is 0.5 (the expected-value rule); before it lower: a change kept is judged again every
    round on evidence that grows for free, while one dropped is never seen again."""
    return 0.5 if final else OPEN_BAR


def log_bf(before: Counts, after: Counts, prior: Prior) -> float:
    """Log Bayes factor, moved against not moved, of one task's two sides (slab: independent rates; spike: one)."""
    a, b = prior.a, prior.b
    slab = betaln(a + before.s, b + before.n - before.s) + betaln(a + after.s, b + after.n - after.s) - 2 * betaln(a, b)
    both = before + after
    return slab - (betaln(a + both.s, b + both.n - both.s) - betaln(a, b))


def p_moved(before: Counts, after: Counts, prior: Prior, pi: float) -> float:
    """Posterior P(the pass rate differs between the two sides) under the spike-and-slab model."""
    log_odds = math.log(pi / (1 - pi)) + log_bf(before, after, prior)
    return 1 / (1 + math.exp(-max(-50.0, min(50.0, log_odds))))


def diff_moments(before: Counts, after: Counts, prior: Prior) -> tuple[float, float]:
    """Mean and variance of p_after − p_before with independent Beta posteriors."""
    def mv(c: Counts) -> tuple[float, float]:
        x, y = c.post(prior)
        return x / (x + y), x * y / ((x + y) ** 2 * (x + y + 1))
    (ma, va), (mb, vb) = mv(after), mv(before)
    return ma - mb, va + vb


@dataclass
class TaskEffect:
    task: str
    p: float  # P(moved)
    mean: float  # E[effect on this task's pass rate] = p · E[diff | moved]
    var: float


def task_effect(task: str, before: Counts, after: Counts, prior: Prior, pi: float, mu: float = 0.0) -> TaskEffect:
    """P(moved) and the moments of the effect; given a move, the data's difference is shrunk towards
    `mu`, the run's learned mean effect on such a task (a predicted fix tends to rise)."""
    p = p_moved(before, after, prior, pi)
    d, v = diff_moments(before, after, prior)
    v0 = EFFECT_SD ** 2
    m = (d / v + mu / v0) / (1 / v + 1 / v0) if v > 0 else d
    v = 1 / (1 / v + 1 / v0) if v > 0 else v
    return TaskEffect(task, p, p * m, p * (v + m * m) - (p * m) ** 2)


def expected_loss(mean: float, var: float, cost: float) -> float:
    """The expected loss of deciding by the mean: σ·(φ(z) − |z|·(1 − Φ(|z|)))."""
    sd = math.sqrt(max(var, 1e-18))
    z = abs(mean - cost) / sd
    return sd * (math.exp(-z * z / 2) / math.sqrt(2 * math.pi) - z * 0.5 * math.erfc(z / math.sqrt(2)))


def p_above_cost(mean: float, var: float, cost: float) -> float:
    """P(effect > cost) under a normal approximation of the posterior."""
    return 0.5 * math.erfc(-(mean - cost) / (math.sqrt(max(var, 1e-18)) * math.sqrt(2)))
