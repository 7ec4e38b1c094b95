"""A budget crossed inside a tree round (docs/search.md "A budget crossed mid-round").

A round starts only the children its allocation affords (ahe.evolution.tree_budget), so a token or
dollar budget is crossed inside a round only when something costs more than forecast. From then on
the round starts nothing that spends the crossed budget: no further evolve call (if the budget
counts the evolve role), no child's evaluation and no merge (if it counts the agent role); a
budget of `total` counts both. The wall-clock budget (`budgets.wall_clock_hours`, not allocated:
the round's evolve calls and evaluations are checked against the loop's clock, `PhaseContext.elapsed`)
counts everything: once reached, nothing more is started. What finished is kept: every evaluated child is a node, every
evolve call's tokens count. A child's evaluation that has started runs to its end (an estimate
from the tasks that happened to run first would be biased). The round still ends as a round (its
line is the best new node, else the best node), then the loop's budget check after the phase ends
the run, and the tree's `best` is judged on what was evaluated, not re-evaluated.

`RoundSpend` is what the run had spent when the round began (scores.json: this iteration's line
rollout and debugger included, the round's own calls not yet) plus what the round spent since
(the children a resumed round finds made are counted again from their folders). What it did not
start is written into the round's record as it happens, so a resumed round says the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ahe.config import Budgets
from ahe.evolution.budget_spent import spent_budget, wall_clock_spent
from ahe.evolution.tree.archive import RoundRecord
from ahe.llm.types import Usage

if TYPE_CHECKING:
    from ahe.evolution.context import PhaseContext
    from ahe.run_folder import RunFolder


@dataclass
class RoundSpend:
    budgets: Budgets  # the run's; its token and dollar budgets are what a round can cross
    spent: dict[str, dict[str, float]]  # field (tokens | cost_usd) -> role -> spent so far
    rec: RoundRecord  # its `crossed` and `not_started` are kept as they happen (a resumed round adds to them)
    elapsed: Callable[[], float] = lambda: 0.0  # the run's wall time in seconds (the loop's clock, across resumes)

    @classmethod
    def start(cls, ctx: "PhaseContext", rec: RoundRecord) -> "RoundSpend":
        b = ctx.cfg.budgets
        totals = ctx.run.load_scores().totals() if b.max_tokens or b.max_cost_usd else {"tokens": {}, "cost_usd": {}}
        return cls(b, {f: {k: float(v) for k, v in totals[f].items() if k != "total"} for f in ("tokens", "cost_usd")},
                   rec, ctx.elapsed)

    def add(self, role: str, usage: Usage) -> None:
        for f, n in (("tokens", usage.total_tokens), ("cost_usd", float(usage.cost_usd or 0.0))):
            self.spent[f][role] = self.spent[f].get(role, 0.0) + n

    def crossed(self, role: str) -> str | None:
        """The wall-clock budget if reached (it counts every role), else the first budget that counts
        `role` (or `total`) and is spent, in the loop's words; None: none is."""
        return wall_clock_spent(self.budgets, self.elapsed()) or spent_budget(self.budgets, self.spent, roles=(role,))

    def skip(self, role: str, what: str, after: str) -> bool:
        """True (and `what` noted as not started) when a budget counting `role` is crossed. What a
        killed session did not start is not started on resume either (a clock's crossing may be lost
        with the killed phase's time; a spend's is counted again the same)."""
        if what in self.rec.not_started:
            return True
        why = self.crossed(role)
        if why is None:
            return False
        self.rec.crossed = self.rec.crossed or f"{why} (after {after})"
        if what not in self.rec.not_started:
            self.rec.not_started.append(what)
        return True


def words(rec: RoundRecord) -> str | None:
    """The round's crossing as history.md and `ahe audit` say it (None: no budget crossed in it)."""
    return f"{rec.crossed}; not started: {', '.join(rec.not_started)}" if rec.crossed else None


def mid_round(run: "RunFolder", it: int) -> str:
    """The loop's end reason's tail when iteration `it`'s tree round crossed a budget ('' if not)."""
    from ahe.evolution.tree.archive import load_tree

    rec = next((r for r in load_tree(run).rounds if r.iteration == it), None)
    if rec is None or not rec.crossed:
        return ""
    where = rec.crossed[rec.crossed.find(" (after "):]  # the amounts are the reason's own
    return f"; crossed mid-round in iteration {it}'s tree round{where}; not started: {', '.join(rec.not_started)}"


def clock_crossed(run: "RunFolder", it: int) -> str | None:
    """The wall-clock budget's words when iteration `it`'s tree round crossed it (None: it did not)."""
    from ahe.evolution.tree.archive import load_tree

    rec = next((r for r in load_tree(run).rounds if r.iteration == it), None)
    if rec is None or not rec.crossed or not rec.crossed.startswith("wall-clock budget"):
        return None
    return rec.crossed[:rec.crossed.find(" (after ")]
