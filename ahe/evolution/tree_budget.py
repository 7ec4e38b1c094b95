"""The tree's budget rule (issue 36 item 5, docs/search.md "A budget across branches"): how many
children a round can afford, and which branches are no longer worth their price.

Pure: it reads the archive's estimates (`TreeNode`) and, per budget of the run, what is left of it
and what one child costs in that budget's own unit (tokens of a role, or dollars) — measured on the
run so far by `ahe.evolution.tree.budget`. The same numbers, the same answer.

- A child costs one evolve call plus one evaluation round of it; the next round's line rollout is
  kept free (`reserve`). The round may make `floor((left - reserve) / child)` children, spread over
  the rounds still to come (at most `ceil(affordable / rounds_left)` now, and never more than
  `width`); the binding budget is the one that affords the fewest.
- A branch's value per unit is its expected improvement over the best estimate (what its child is
  expected to add, as `choose_expansions`' `ei` rule reads it) divided by the price of that child.
  A live branch whose value per unit is below `stop_share` of the best branch's is `stopped`: not
  expanded; the run goes on with the others. Every round judges every branch again (a stopped one
  is expanded again once it is worth its price next to the others). The best branch is never stopped.
- The merge (one more evaluation round) is tried only when it still fits after the children.
"""

from __future__ import annotations

import math
from typing import Sequence

from pydantic import BaseModel, Field

from ahe.evolution.tree_choice import TreeNode, best_mean, expected_improvement


class Spend(BaseModel):
    """One budget of the run, in its own unit."""

    unit: str = Field(description="what the budget counts, e.g. 'tokens (total)' or 'dollars (evolve)'")
    left: float = Field(description="the budget minus what the run has spent of it")
    evolve_call: float = Field(ge=0.0, description="one evolve call, in this unit")
    evaluation: float = Field(ge=0.0, description="one evaluation round of a child, in this unit")
    reserve: float = Field(default=0.0, ge=0.0, description="kept free for the next round's line rollout")

    @property
    def child(self) -> float:
        return self.evolve_call + self.evaluation

    def affordable(self) -> int:
        """Children the budget can pay for (any number when a child costs nothing in this unit)."""
        free = self.left - self.reserve
        if self.child <= 0:
            return 10**6 if free >= 0 else 0
        return max(0, math.floor(free / self.child + 1e-9))


class Allocation(BaseModel):
    slots: int = Field(description="children this round makes")
    unit: str | None = None  # the binding budget (None: no budget)
    affordable: int | None = None  # children the binding budget can still pay for, over all rounds
    value: dict[str, float] = Field(default_factory=dict, description="live branch -> expected gain per unit")
    stopped: dict[str, str] = Field(default_factory=dict, description="branch -> why it is stopped")
    merge: bool = True  # one more evaluation round still fits after the children


def value_per_unit(nodes: Sequence[TreeNode], price: float) -> dict[str, float]:
    """Each live branch's expected improvement over the best estimate, per unit of its child's price."""
    best = best_mean(nodes)
    live = [n for n in nodes if not (n.pruned or n.exhausted or n.stopped)]
    return {n.id: expected_improvement(n.mean, n.sd, best) / price for n in live}


def allocate(nodes: Sequence[TreeNode], spends: Sequence[Spend], *, width: int, rounds_left: int,
             stop_share: float = 0.25) -> Allocation:
    """This round's children and the branches to stop (see the module's rule)."""
    if not spends:
        return Allocation(slots=width)
    bind = min(spends, key=lambda s: (s.affordable(), s.unit))
    can = bind.affordable()
    slots = min(width, can, math.ceil(can / max(rounds_left, 1)))
    merge = all(s.left - s.reserve - slots * s.child >= s.evaluation for s in spends)
    if slots == 0 or not nodes:
        return Allocation(slots=slots, unit=bind.unit, affordable=can, merge=merge and slots > 0)
    value = value_per_unit(nodes, _price(bind))
    stopped: dict[str, str] = {}
    if len(value) >= 2:
        top = max(value, key=lambda i: (value[i], [-ord(c) for c in i]))
        for nid, v in sorted(value.items()):
            if nid != top and v < stop_share * value[top]:
                stopped[nid] = (f"its child's expected gain per unit of budget is {v:.3g} pass@1 per {bind.unit} "
                                f"({v * _price(bind):.4f} for one child at {_price(bind):,.4g}), below {stop_share:g} "
                                f"of the best branch's ({top}: {value[top]:.3g})")
    return Allocation(slots=slots, unit=bind.unit, affordable=can, value=value, stopped=stopped, merge=merge)


def _price(spend: Spend) -> float:
    return spend.child if spend.child > 0 else 1.0
