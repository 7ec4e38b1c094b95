"""The SWE-CI numbers, exactly as the paper defines them (docs/swe-ci.md).

Standard library only: this file is also copied into every SWE-CI task's `tests/` folder,
where the verifier imports it inside the sandbox, so the formulas live in one place.

* n(c) = |{t in T : t passes on c}|, T the tests that pass on the target c* (so n(c*) = |T|).
* a(c) = (n(c) - n(c0)) / (n(c*) - n(c0))  if n(c) >= n(c0)
         (n(c) - n(c0)) / n(c0)             otherwise;   a in [-1, 1].
* e = sum_i gamma^i a(c_i) / sum_i gamma^i over the rounds' codebases c_1..c_N, gamma >= 1.
* a regression: a test that passed at round i-1 fails at round i (round 0 is the base c0).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence


def n_pass(statuses: Mapping[str, str], target_tests: Iterable[str]) -> int:
    """n(c): how many of the target's passing tests T pass on the codebase with `statuses`."""
    return sum(1 for t in target_tests if statuses.get(t) == "passed")


def normalized_change(n: int, n_base: int, n_target: int) -> float:
    """a(c) from n(c), n(c0) and n(c*); 0 at the base, 1 at the target, -1 when nothing passes."""
    if n_target <= n_base:
        raise ValueError(
            f"normalized change needs n(c*) > n(c0), got n(c*)={n_target}, n(c0)={n_base}"
        )
    if n >= n_base:
        return (n - n_base) / (n_target - n_base)
    return (n - n_base) / n_base  # n_base > n >= 0 here, so never a division by zero


def padded(changes: Sequence[float], rounds: int | None) -> list[float]:
    """a(c_1..c_N) with N = `rounds`: a loop that stopped early keeps its last codebase.

    The loop stops once a = 1; the remaining rounds would see the same (solved) codebase, so
    they count with the last value, as the SWE-CI reference implementation fills them.
    """
    seq = list(changes)
    if rounds is None or len(seq) >= rounds:
        return seq[: rounds if rounds is not None else len(seq)]
    return seq + [seq[-1] if seq else 0.0] * (rounds - len(seq))


def evoscore(changes: Sequence[float], gamma: float = 1.0, rounds: int | None = None) -> float:
    """e = sum gamma^i a(c_i) / sum gamma^i, i = 1..N; gamma = 1 gives the mean a(c_i)."""
    if gamma < 1:
        raise ValueError(f"EvoScore needs gamma >= 1, got {gamma}")
    seq = padded(changes, rounds)
    if not seq:
        return 0.0
    weights = [gamma ** i for i in range(1, len(seq) + 1)]
    return sum(w * a for w, a in zip(weights, seq)) / sum(weights)


def regressions(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Tests that passed on `before` (round i-1) and do not pass on `after` (round i)."""
    return sorted(t for t, s in before.items() if s == "passed" and after.get(t) != "passed")


def zero_regression(rounds_regressions: Iterable[Sequence[str]]) -> float:
    """1.0 when no round had a regression, else 0.0."""
    return 0.0 if any(len(r) for r in rounds_regressions) else 1.0


def solved(changes: Sequence[float]) -> float:
    """1.0 when some round reached a = 1 (the trial counts towards the solved rate)."""
    return 1.0 if any(a >= 1.0 for a in changes) else 0.0
