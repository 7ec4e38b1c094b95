"""A spent token or dollar budget in words: the one sentence every check of `budgets.max_tokens` and
`budgets.max_cost_usd` says (the loop's after a phase, a tree round's crossing, the tree's finalists);
and the wall-clock budget's (`budgets.wall_clock_hours`: the loop's check after a phase, a tree round's).

Pure: it reads the budgets and what was spent per role (scores.json's totals, or a round's running
count); `total` is the sum of every role (a `total` key in the counts is not counted again).
"""

from __future__ import annotations

from typing import Iterable, Mapping

from ahe.config import Budgets

FIELDS = (("tokens", "max_tokens"), ("cost_usd", "max_cost_usd"))


def spent_budget(budgets: Budgets, totals: Mapping[str, Mapping[str, float]], roles: Iterable[str] | None = None) -> str | None:
    """The first token budget, then dollar budget, that counts one of `roles` (None: any budget; a
    budget of `total` counts every role) and is reached, in words; None when none is.
    `totals`: "tokens" / "cost_usd" -> role -> spent."""
    want = None if roles is None else set(roles)
    for field, name in FIELDS:
        have = totals.get(field, {})
        for role, limit in getattr(budgets, name).items():
            if want is not None and role != "total" and role not in want:
                continue
            spent = float(sum(v for k, v in have.items() if k != "total") if role == "total" else have.get(role, 0.0))
            if spent >= limit:
                return words(field, role, float(limit), spent)
    return None


def words(field: str, role: str, limit: float, spent: float) -> str:
    """`token budget of agent (18,000) reached: 21,302 spent, 3,302 over` (dollars: `cost budget of …`)."""
    if field == "tokens":
        return f"token budget of {role} ({limit:,.0f}) reached: {spent:,.0f} spent, {spent - limit:,.0f} over"
    return f"cost budget of {role} (${limit:,.2f}) reached: ${spent:,.2f} spent, ${spent - limit:,.2f} over"


def wall_clock_spent(budgets: Budgets, elapsed_sec: float) -> str | None:
    """`wall-clock budget of 0.01 h reached` once the run's wall time (the loop's clock, counted across
    resumes) reaches `budgets.wall_clock_hours`; None when it has not, or without that budget."""
    hours = budgets.wall_clock_hours
    if hours is None or elapsed_sec < hours * 3600:
        return None
    return f"wall-clock budget of {hours} h reached"
