"""The tree search's pure choices (issue 36, docs/search.md): which nodes to expand, which can no
longer win, which to re-evaluate at the end.

A node is an evaluated harness of the archive with the joint model's estimate of its true pass@1
(`mean`) and the uncertainty of that estimate (`sd`). The rules read nothing else, so the real
loop (`search: tree`) and the simulator (`ahe simulate --search tree`) run the same code.

- `choose_expansions`: `thompson` (each slot: one draw from every live node's normal posterior,
  the highest draw wins) or `ei` (expected improvement over the best estimate, highest first);
- `prunable`: a node whose mean + `z` sd is below the best mean cannot win (the best never is);
- `finalists`: the `n` best estimates, the candidates of the final re-evaluation.

A node that is `pruned`, `exhausted` (its last evolve calls proposed nothing new) or `stopped`
(under a budget, its value per unit fell below the others': ahe.evolution.tree_budget) is not
expanded. Ties break on the node id, so the choices are deterministic given `rng`.
"""

from __future__ import annotations

import math
import random
from typing import Literal, Sequence

from pydantic import BaseModel, Field

Rule = Literal["ei", "thompson"]


class TreeNode(BaseModel):
    id: str
    mean: float = Field(ge=0.0, le=1.0, description="estimated true pass@1")
    sd: float = Field(ge=0.0, description="standard deviation of that estimate")
    parent: str | None = None
    pruned: bool = False
    exhausted: bool = False
    stopped: bool = False  # a budget's rule (ahe.evolution.tree_budget): no longer worth its price


def _live(nodes: Sequence[TreeNode]) -> list[TreeNode]:
    return sorted((n for n in nodes if not n.pruned and not n.exhausted and not n.stopped), key=lambda n: n.id)


def best_mean(nodes: Sequence[TreeNode]) -> float:
    return max(n.mean for n in nodes)


def expected_improvement(mean: float, sd: float, best: float) -> float:
    """E[max(X - best, 0)] for X ~ Normal(mean, sd)."""
    if sd <= 1e-12:
        return max(mean - best, 0.0)
    z = (mean - best) / sd
    pdf = math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1 + math.erf(z / math.sqrt(2)))
    return (mean - best) * cdf + sd * pdf


def choose_expansions(nodes: Sequence[TreeNode], slots: int, rng: random.Random, *, rule: Rule = "thompson") -> list[str]:
    """The ids of the nodes to expand in the next `slots` evolve calls, in order (a node may come
    twice when there are fewer live nodes than slots). Empty when no node is live."""
    live = _live(nodes)
    if not live or slots <= 0:
        return []
    if rule == "ei":
        best = best_mean(nodes)
        ranked = sorted(live, key=lambda n: (-expected_improvement(n.mean, n.sd, best), n.id))
        return [ranked[i % len(ranked)].id for i in range(slots)]
    out: list[str] = []
    pool = list(live)
    for _ in range(slots):
        if not pool:
            pool = list(live)
        draws = [(rng.gauss(n.mean, n.sd) if n.sd > 0 else n.mean, n.id) for n in pool]
        top = max(draws, key=lambda d: (d[0], [-ord(ch) for ch in d[1]]))[1]
        out.append(top)
        pool = [n for n in pool if n.id != top]
    return out


def prunable(nodes: Sequence[TreeNode], *, z: float = 3.0) -> set[str]:
    """The ids of the nodes not yet pruned whose mean + z·sd is below the best mean."""
    if not nodes:
        return set()
    best = best_mean(nodes)
    return {n.id for n in nodes if not n.pruned and n.mean + z * n.sd < best}


def finalists(nodes: Sequence[TreeNode], n: int) -> list[str]:
    """The ids of the `n` best estimates, best first (pruned nodes only when too few others)."""
    order = sorted(nodes, key=lambda x: (x.pruned, -x.mean, x.id))
    return [x.id for x in order[: max(n, 0)]]
