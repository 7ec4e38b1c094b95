"""Evidence under noise: Beta–Binomial posteriors and the run's per-task ledger of trials.

A task's outcome on a harness is Bernoulli(p); with a Beta(a0, b0) prior, after s successes in
n trials p ~ Beta(a0 + s, b0 + n − s). The prior is fitted to the run's own tasks (`fit_prior`):
agent benchmarks are U-shaped — most tasks almost always pass or almost always fail, a few are
flaky — so a task that failed 8 times out of 8 is believed to fail nearly always, and one
that passed 4 of 8 is believed flaky. "Did task τ move between harness A and B" is the
posterior probability P(p_B > p_A), integrated numerically (no sampling).

The ledger pools every trial the run made of a task — rounds and re-evaluations — by the
*harness state* it ran on (the set of changes present). Trials made on another state count as
evidence about state S for task τ when every change in which the two states differ was
already judged and found not to touch τ: that is the run's history telling how flaky τ is
and where its level sits, which two trials alone cannot.
"""

from __future__ import annotations

import math
from functools import lru_cache
from dataclasses import dataclass, field

import numpy as np
from scipy.special import betainc, betaln


@dataclass(frozen=True)
class Prior:
    a: float = 1.0
    b: float = 1.0


UNIFORM = Prior()
_U = (1 - np.cos(np.linspace(0, np.pi, 301))) / 2  # grid dense near 0 and 1, where the mass is


@dataclass(frozen=True)
class Counts:
    s: int = 0
    n: int = 0

    def __add__(self, o: "Counts") -> "Counts":
        return Counts(self.s + o.s, self.n + o.n)

    @property
    def mean(self) -> float:
        return (1 + self.s) / (2 + self.n)

    def post(self, prior: Prior) -> tuple[float, float]:
        return prior.a + self.s, prior.b + self.n - self.s

    @property
    def flaky(self) -> bool:
        """Both outcomes seen: the task is not deterministic on this harness."""
        return 0 < self.s < self.n


def prob_greater(b: Counts, a: Counts, prior: Prior = UNIFORM) -> float:
    """P(p_b > p_a) with p ~ Beta(prior + counts) on each side: Σ P(p_b in cell) · P(p_a < cell middle)."""
    return _prob_greater(b.post(prior), a.post(prior))


@lru_cache(maxsize=65536)
def _prob_greater(post_b: tuple[float, float], post_a: tuple[float, float]) -> float:
    ab, bb = post_b
    aa, ba = post_a
    cdf_b = betainc(ab, bb, _U)
    mid = (_U[1:] + _U[:-1]) / 2
    return float(np.clip(np.sum(np.diff(cdf_b) * betainc(aa, ba, mid)), 0.0, 1.0))


def prob_between(x: Counts, lo: Counts, hi: Counts, prior: Prior = UNIFORM) -> float:
    """How much more likely `x` is under `lo`'s level than under `hi`'s (posterior predictive),
    as a probability: 1 means x looks like `lo`, 0 like `hi`."""
    def loglik(c: Counts, level: Counts) -> float:  # Beta-Binomial predictive of c given level's posterior
        a, b = level.post(prior)
        return float(betaln(a + c.s, b + c.n - c.s) - betaln(a, b))

    d = loglik(x, hi) - loglik(x, lo)
    return 1.0 / (1.0 + math.exp(max(-50.0, min(50.0, d))))


def fit_prior(counts: list[Counts], floor: float = 0.1, ceiling: float = 1.0) -> Prior:
    """A Beta prior for the tasks' pass rates by the method of moments (binomial noise removed),
    bounded so that a handful of tasks cannot make it dogmatic."""
    rows = [c for c in counts if c.n >= 2]
    if len(rows) < 5:
        return UNIFORM
    r = np.array([c.s / c.n for c in rows])
    n = np.array([c.n for c in rows], dtype=float)
    m = float(r.mean())
    if m <= 0:  # every trial failed: a U-shaped benchmark's failing side, not a coin (else an all-fail run is lifted to 1/(n+2))
        return Prior(floor, ceiling)
    if m >= 1:
        return Prior(ceiling, floor)
    v = float(r.var()) - float(np.mean(m * (1 - m) / n))
    v = max(v, 1e-6)
    common = max(m * (1 - m) / v - 1, 1e-3)
    a, b = m * common, (1 - m) * common
    scale = max(floor / min(a, b), 1.0)  # keep the smaller parameter ≥ floor, the shape unchanged
    a, b = a * scale, b * scale
    return Prior(min(a, ceiling), min(b, ceiling))


@dataclass
class Ledger:
    """Trials per (task, state); `touched[change]` = tasks a judged change was found to move."""

    obs: dict[str, dict[frozenset[str], Counts]] = field(default_factory=dict)  # task -> state -> counts
    judged: set[str] = field(default_factory=set)
    touched: dict[str, set[str]] = field(default_factory=dict)

    def add(self, task: str, state: frozenset[str], s: int, n: int) -> None:
        if n:
            per = self.obs.setdefault(task, {})
            per[state] = per.get(state, Counts()) + Counts(s, n)

    def pooled(self, task: str, state: frozenset[str]) -> Counts:
        """All trials of `task` that are evidence about `state` (see the module docstring)."""
        s = n = 0
        judged, touched = self.judged, self.touched
        for st, c in self.obs.get(task, {}).items():
            if st is state or st == state:
                s += c.s
                n += c.n
                continue
            diff = st ^ state
            # every change the two states differ in was judged (a set test), and none of them moved the task
            if diff <= judged and not any(task in touched.get(ch, ()) for ch in diff):
                s += c.s
                n += c.n
        return Counts(s, n)

    def compatible(self, task: str, st: frozenset[str], state: frozenset[str]) -> bool:
        """Trials of `task` on `st` are evidence about `state`."""
        return all(ch in self.judged and task not in self.touched.get(ch, ()) for ch in st ^ state)

    def exact(self, task: str, state: frozenset[str]) -> Counts:
        return self.obs.get(task, {}).get(state, Counts())
