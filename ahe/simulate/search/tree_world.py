"""Tree worlds: what the evolve agent proposes depends on the harness it starts from.

A world holds a pool of candidate changes (one marker file `sim/<uid>.md` each, as in
`ahe.simulate.world`). From a parent harness (its set of markers) the scripted evolve agent
proposes a few changes of the pool that the parent lacks, drawn with weights that follow the
parent's *failing* tasks as the agent sees them (its manifest's predicted fixes, with the
world's manifest quality): a task the parent already passes draws no more fixes. Proposals on
different branches overlap (one pool). Effects interact:

- diminishing returns: a change's gain on a task is a share of the headroom left (to `cap`);
- prerequisites: some gains count only when an enabler (a change worth ~nothing alone) is present;
- conflicts: two changes whose gains vanish when both are present;
- dead ends: a small real gain that, once kept, blocks a family of larger ones.

The proposal is a function of (seed, parent's markers, how many children that parent had), so
every strategy that expands the same parent the same number of times sees the same changes.
"""

from __future__ import annotations

import hashlib
import random

from pydantic import BaseModel, Field

from ahe.simulate.scenario import Scenario, _Strict
from ahe.simulate.world import make_world


class TreeSpec(_Strict):
    pool: int = Field(default=40, ge=4, le=400, description="candidate changes in the world")
    prerequisites: float = Field(default=0.2, ge=0, le=1, description="share of beneficial changes that need an enabler")
    conflicts: int = Field(default=3, ge=0, description="pairs of beneficial changes that cancel each other")
    dead_ends: int = Field(default=2, ge=0, description="small gains that block a family of larger ones")
    blocked: tuple[int, int] = (2, 4)  # how many changes one dead end blocks
    big_gain: tuple[float, float] = (0.6, 0.9)  # share of headroom a blocked (large) change wins on a task


class TreeScenario(Scenario):
    tree: TreeSpec = Field(default_factory=TreeSpec)


class PoolChange(BaseModel):
    uid: str
    kind: str
    effects: dict[str, float] = Field(default_factory=dict)  # task -> gain (share of headroom, > 0) or loss (< 0)
    predicted_fixes: list[str] = Field(default_factory=list)
    predicted_regressions: list[str] = Field(default_factory=list)
    requires: str | None = None
    conflicts: list[str] = Field(default_factory=list)
    blocks: list[str] = Field(default_factory=list)
    net: float = 0.0  # true change of pass@1 on the seed harness
    iteration: int = 0  # not a stream: kept for the simulator's metrics

    @property
    def real(self) -> bool:
        return abs(self.net) > 1e-9

    @property
    def marker(self) -> str:
        return f"sim/{self.uid}.md"


class TreeWorld(BaseModel):
    seed: int
    cap: float
    per_call: tuple[int, int]
    base: dict[str, float]
    changes: dict[str, PoolChange] = Field(default_factory=dict)
    best: list[str] = Field(default_factory=list)  # the best harness found by local search on the truth

    def _active(self, c: PoolChange, markers: set[str]) -> bool:
        if c.requires and c.requires not in markers:
            return False
        if any(o in markers for o in c.conflicts):
            return False
        return not any(c.uid in self.changes[b].blocks for b in markers if b in self.changes)

    def p(self, task: str, markers: set[str]) -> float:
        base, keep, loss = self.base[task], 1.0, 0.0
        for uid in markers:
            c = self.changes.get(uid)
            d = c.effects.get(task, 0.0) if c else 0.0
            if d < 0:
                loss += d
            elif d > 0 and self._active(c, markers):
                keep *= 1.0 - d
        gain = max(0.0, self.cap - base) * (1.0 - keep)
        return min(1.0, max(0.0, base + gain + loss))

    def pass_at_1(self, markers: set[str]) -> float:
        return sum(self.p(t, markers) for t in self.base) / len(self.base)

    def oracle_markers(self, upto_iteration: int | None = None) -> set[str]:
        return set(self.best)

    def propose(self, markers: frozenset[str], nth: int) -> list[PoolChange]:
        """The changes the evolve agent commits from a parent with these markers, its `nth` child."""
        key = f"{self.seed}:{','.join(sorted(markers))}:{nth}"
        rng = random.Random(hashlib.blake2b(key.encode(), digest_size=8).digest())
        todo = [c for c in self.changes.values() if c.uid not in markers]
        fails = {t: 1.0 - self.p(t, set(markers)) for t in self.base}
        weights = [0.05 + sum(fails[t] for t in c.predicted_fixes) for c in todo]
        out: list[PoolChange] = []
        for _ in range(min(rng.randint(*self.per_call), len(todo))):
            i = rng.choices(range(len(todo)), weights=weights)[0]
            out.append(todo.pop(i))
            weights.pop(i)
        return out


def make_tree_world(sc: TreeScenario, seed: int) -> TreeWorld:
    """The pool, its interactions and the best reachable harness of one seed (deterministic)."""
    from ahe.simulate.world import _predict

    base = make_world(sc.model_copy(update={"iterations": 1}), seed).base  # the same task mix as the line worlds
    rng = random.Random(f"ahe-tree-world:{seed}")
    tr, em = sc.tree, sc.changes.effects
    w = TreeWorld(seed=seed, cap=em.cap, per_call=sc.changes.per_iteration, base=base)
    can_gain = [t for t, p in base.items() if p < 0.9]
    can_lose = [t for t, p in base.items() if p > 0.3]

    def add(kind: str, gains: dict[str, float], losses: dict[str, float], claim: list[str] | None = None) -> PoolChange:
        c = PoolChange(uid=f"t{len(w.changes) + 1:03d}-{rng.getrandbits(32):08x}", kind=kind, effects={**gains, **losses})
        _predict(sc, rng, c, can_gain, can_lose)  # type: ignore[arg-type]  (the same fields as a TrueChange)
        if claim:
            c.predicted_fixes = sorted(set(c.predicted_fixes) | set(claim))
        w.changes[c.uid] = c
        return c

    def tasks(pool: list[str], lo_hi: tuple[int, int]) -> list[str]:
        return rng.sample(pool, min(rng.randint(*lo_hi), len(pool)))

    kinds = list(em.weights)
    for _ in range(tr.pool):
        kind = rng.choices(kinds, weights=[em.weights[k] for k in kinds])[0]
        n_gain = {"beneficial": em.beneficial_tasks, "mixed": (1, 2)}.get(kind, (0, 0))
        n_loss = {"harmful": em.harmful_tasks, "mixed": (1, 2)}.get(kind, (0, 0))
        gains = {t: round(rng.uniform(*em.gain), 4) for t in tasks(can_gain, n_gain)}
        losses = {t: -round(min(base[t], rng.uniform(*em.loss)), 4) for t in tasks([t for t in can_lose if t not in gains], n_loss)}
        add(kind, gains, losses)
    good = [c for c in w.changes.values() if c.kind == "beneficial"]
    for c in rng.sample(good, round(tr.prerequisites * len(good))):
        enabler = add("enabler", {}, {}, claim=[t for t, d in c.effects.items() if d > 0])
        c.requires = enabler.uid
    free = [c for c in good if c.requires is None]
    for _ in range(min(tr.conflicts, len(free) // 2)):
        a, b = rng.sample(free, 2)
        free = [c for c in free if c not in (a, b)]
        a.conflicts, b.conflicts = [b.uid], [a.uid]
    for _ in range(tr.dead_ends):
        big = [add("beneficial", {t: round(rng.uniform(*tr.big_gain), 4) for t in tasks(can_gain, (2, 3))}, {})
               for _ in range(rng.randint(*tr.blocked))]
        claim = sorted({t for b in big for t in b.effects})
        add("dead-end", {t: round(rng.uniform(*em.gain), 4) for t in tasks(claim, (1, 1))}, {}, claim=claim).blocks = [b.uid for b in big]
    seed_true = w.pass_at_1(set())
    for c in w.changes.values():
        c.net = w.pass_at_1({c.uid}) - seed_true
    w.best = sorted(best_reachable(w))
    return w


def best_reachable(w: TreeWorld) -> set[str]:
    """The best harness made of pool changes, by local search on the truth (add, drop, swap until
    nothing helps, from the empty harness and from each prerequisite pair): a lower bound of the
    true best, so a share of it can overstate a little, never understate."""
    def climb(start: set[str]) -> tuple[float, set[str]]:
        cur, val = set(start), w.pass_at_1(start)
        while True:
            moves = [cur | {u} for u in w.changes if u not in cur] + [cur - {u} for u in cur]
            moves += [cur | {c.requires, c.uid} for c in w.changes.values() if c.requires and c.uid not in cur]
            top = max(moves, key=w.pass_at_1, default=cur)
            if w.pass_at_1(top) <= val + 1e-12:
                return val, cur
            cur, val = top, w.pass_at_1(top)

    return max((climb(set()), climb({u for u, c in w.changes.items() if c.kind == "beneficial" and not c.conflicts})),
               key=lambda x: x[0])[1]
