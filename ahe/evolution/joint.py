"""Every change's effect on every task, estimated jointly from every harness the run evaluated.

A run evaluates a sequence of harnesses — each a set of changes — and the ledger keeps every
trial of a task by the harness it ran on. Judging a change by "all trials with it against all
trials without it" is confounded: the trials without it ran before it was made, and so before
every later change, and a later change's gain is credited to it (docs/decisions.md, "Tried and
not kept"). Here, per task, the candidate explanations compete:

- nobody moved the task (one rate for every harness);
- change c moved it (one rate for harnesses with c, another without);
- changes c and c' both moved it (a rate per combination seen; only pairs the run has seen in
  at least three of the four combinations, else the pair says no more than one of them).

Each explanation's weight is its prior (a change moves a task it named more often than one
it did not: `logit`) times its marginal likelihood (Beta–Binomial per group, the run's fitted
task prior). A change's effect on the task is the weighted mean of what each explanation
says: zero where it did not move the task, the difference of its groups' posterior means
where it did. A difference in differences by model averaging, so the history is kept and the
confound is not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import betaln

from ahe.evolution.evidence import Counts, Prior


@dataclass(frozen=True)
class Effect:
    """A change's effect on one task's pass rate: P(it moved the task), mean and variance."""

    p: float
    mean: float
    var: float


def _loglik(s: np.ndarray, n: np.ndarray, prior: Prior) -> np.ndarray:
    """Log Beta–Binomial marginal of each group (0 for an empty group)."""
    return betaln(prior.a + s, prior.b + n - s) - betaln(prior.a, prior.b)


def _moments(s: np.ndarray, n: np.ndarray, prior: Prior) -> tuple[np.ndarray, np.ndarray]:
    x, y = prior.a + s, prior.b + n - s
    return x / (x + y), x * y / ((x + y) ** 2 * (x + y + 1))


def task_effects(states: list[tuple[frozenset[str], Counts]], logit: dict[str, float], prior: Prior,
                 pairs: bool = True) -> dict[str, Effect]:
    """Per candidate change (the keys of `logit`, its prior log-odds of having moved this task), its effect
    on the task, from the task's trials on every harness state. A change present in every state or in none
    cannot be told apart from the task's level and is left out (no entry)."""
    if not states:
        return {}
    s = np.array([c.s for _, c in states], dtype=float)
    n = np.array([c.n for _, c in states], dtype=float)
    keys = [k for k in logit if 0 < sum(1 for st, _ in states if k in st) < len(states)]
    if not keys:
        return {}
    x = np.array([[k in st for k in keys] for st, _ in states], dtype=float)  # states × changes
    s_all, n_all = s.sum(), n.sum()
    lp0 = float(_loglik(np.array(s_all), np.array(n_all), prior))
    s_in, n_in = s @ x, n @ x
    s_out, n_out = s_all - s_in, n_all - n_in
    lg = np.array([logit[k] for k in keys])
    lp1 = _loglik(s_in, n_in, prior) + _loglik(s_out, n_out, prior) + lg
    m_in, v_in = _moments(s_in, n_in, prior)
    m_out, v_out = _moments(s_out, n_out, prior)
    e1, q1 = m_in - m_out, v_in + v_out  # effect and its variance under "only c moved it"
    terms = [np.array([lp0]), lp1]
    lp2 = None
    if pairs and len(keys) > 1:
        s11, n11 = x.T @ (s[:, None] * x), x.T @ (n[:, None] * x)
        s10, n10 = s_in[:, None] - s11, n_in[:, None] - n11
        s01, n01 = s_in[None, :] - s11, n_in[None, :] - n11
        s00, n00 = s_all - s10 - s01 - s11, n_all - n10 - n01 - n11
        seen = (n11 > 0).astype(int) + (n10 > 0) + (n01 > 0) + (n00 > 0)
        lp2 = (_loglik(s11, n11, prior) + _loglik(s10, n10, prior) + _loglik(s01, n01, prior) + _loglik(s00, n00, prior)
               + lg[:, None] + lg[None, :])
        upper = np.triu(np.ones_like(lp2, dtype=bool), 1)
        lp2 = np.where(upper & (seen >= 3), lp2, -np.inf)
        terms.append(lp2.ravel())
    top = max(float(np.max(t)) for t in terms)
    z = sum(float(np.exp(t - top).sum()) for t in terms)
    w1 = np.exp(lp1 - top) / z
    p, mean, sq = w1.copy(), w1 * e1, w1 * (q1 + e1 * e1)
    if lp2 is not None:
        w2 = np.exp(lp2 - top) / z  # pair (i, j), i < j; zero where not a model
        m11, v11 = _moments(s11, n11, prior)
        m10, v10 = _moments(s10, n10, prior)
        m01, v01 = _moments(s01, n01, prior)
        m00, v00 = _moments(s00, n00, prior)
        # effect of i (rows) within the pair: with j present (11 − 01) and with j absent (10 − 00), weighted by data
        wa, wb = _harm(n11, n01), _harm(n10, n00)
        tot = np.maximum(wa + wb, 1e-12)
        ei = (wa * (m11 - m01) + wb * (m10 - m00)) / tot
        qi = (wa ** 2 * (v11 + v01) + wb ** 2 * (v10 + v00)) / tot ** 2
        # effect of j (columns): with i present (11 − 10) and absent (01 − 00)
        wc, wd = _harm(n11, n10), _harm(n01, n00)
        tot2 = np.maximum(wc + wd, 1e-12)
        ej = (wc * (m11 - m10) + wd * (m01 - m00)) / tot2
        qj = (wc ** 2 * (v11 + v10) + wd ** 2 * (v01 + v00)) / tot2 ** 2
        wt = w2.T
        p += w2.sum(axis=1) + wt.sum(axis=1)
        mean += (w2 * ei).sum(axis=1) + (wt * ej.T).sum(axis=1)
        sq += (w2 * (qi + ei * ei)).sum(axis=1) + (wt * (qj.T + ej.T * ej.T)).sum(axis=1)
    return {k: Effect(float(p[i]), float(mean[i]), float(max(sq[i] - mean[i] ** 2, 0.0))) for i, k in enumerate(keys)}


def _harm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How much a difference of two groups' rates says: a·b / (a + b) trials (0 when either is empty)."""
    return np.where((a > 0) & (b > 0), a * b / np.maximum(a + b, 1e-12), 0.0)
