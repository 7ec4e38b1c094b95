"""Search over an archive of evaluated harnesses in the simulator (docs/search.md).

Every node is a harness (a set of change markers) with the trials it was evaluated on. Its
estimate of true pass@1 and the uncertainty of it come from a per-task Beta model in which a
child inherits its parent's posterior as `inherit` trials of evidence per task (a child
differs from its parent on the few tasks its changes touch, so the untouched tasks borrow the
parent's trials; the touched ones are soon decided by the child's own). Each step:

1. choose the node to expand — `thompson` (a draw from every live node's posterior, the
   highest draw wins), `ei` (the highest expected improvement over the best estimate), or
   `line` (the paper's line in the same machinery: always the current node; the line moves to
   a child whose estimate beats it, else stays — a rollback of the whole child);
2. the evolve agent proposes from that parent (`propose(markers, nth, step)`); a child whose
   harness is already in the archive is not evaluated again (the digest of what was tried);
3. the child is evaluated, k trials a task, on the tasks its manifests name and a random
   `eval_share` of the others (1.0: a full round); the rest it inherits from its parent;
4. prune: a node whose estimate + `prune_z` σ is below the best estimate can no longer win
   and is not expanded again; nor is a node whose last three evolve calls proposed nothing new.

At the end `final_top` full rounds go, one by one, to whichever node the model rates best at
that moment (a lucky leader falls and the next is checked); the best of the nodes so checked is
returned. Every trial counts against the budget, the re-evaluation too.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Callable, Literal

import numpy as np
from pydantic import BaseModel, Field

Select = Literal["thompson", "ei", "line"]
# (parent's markers, its nth child, step) -> the proposed changes: (uid, the tasks its manifest names)
Proposer = Callable[[frozenset, int, int], list[tuple[str, list[str]]]]


class TreeSettings(BaseModel):
    select: Select = "thompson"
    inherit: float = Field(default=40.0, ge=0, description="trials of its parent's evidence a child inherits on a task its changes do not name")
    inherit_named: float = Field(default=1.0, ge=0, description="... on a task its changes' manifests name (fixes or regressions)")
    eval_share: float = Field(default=0.3, gt=0, le=1, description="share of the unnamed tasks a child is evaluated on (the named ones always)")
    prune_z: float = Field(default=3.0, gt=0)
    final_top: int = Field(default=2, ge=0)
    split: bool = Field(default=True, description="tree: one child per proposed change, instead of one per evolve call")
    merge: bool = Field(default=True, description="tree: merge the children of one parent that beat it")


@dataclass
class Node:
    id: int
    parent: int | None
    markers: frozenset
    s: np.ndarray
    n: np.ndarray
    named: np.ndarray | None = None  # tasks its new changes' manifests name
    children: int = 0
    dry: int = 0  # evolve calls from it in a row that proposed nothing new
    pruned: bool = False
    evals: int = 0


@dataclass
class SearchResult:
    markers: frozenset
    trials: int
    expansions: int
    nodes: list[Node] = field(default_factory=list)

    @property
    def pruned(self) -> int:
        return sum(1 for n in self.nodes if n.pruned)


class TreeSearch:
    def __init__(self, p: Callable[[str, set], float], tasks: list[str], k: int, key: str, settings: TreeSettings) -> None:
        self.p, self.tasks, self.k, self.key, self.cfg = p, tasks, k, key, settings
        self.nodes: list[Node] = []
        self.spent = 0

    # -------------------------------------------------------------- the model
    def posteriors(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per node: per-task posterior mean and variance (parents come before their children)."""
        ab: list[tuple[np.ndarray, np.ndarray]] = []
        for nd in self.nodes:
            if nd.parent is None:
                a0 = b0 = np.full(len(self.tasks), 0.5)
            else:
                pa, pb = ab[nd.parent]
                w = np.where(nd.named, self.cfg.inherit_named, self.cfg.inherit) if nd.named is not None else self.cfg.inherit
                scale = np.minimum(1.0, w / (pa + pb))
                a0, b0 = scale * pa + 0.05, scale * pb + 0.05
            ab.append((a0 + nd.s, b0 + nd.n - nd.s))
        return [(a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))) for a, b in ab]

    def estimates(self) -> tuple[np.ndarray, np.ndarray]:
        post = self.posteriors()
        t = len(self.tasks)
        mu = np.array([m.mean() for m, _ in post])
        sd = np.array([math.sqrt(v.sum()) / t for _, v in post])
        return mu, sd

    # -------------------------------------------------------------- the world
    def _rng(self, *parts: object) -> np.random.Generator:
        h = hashlib.blake2b(":".join(map(str, (self.key, *parts))).encode(), digest_size=8).digest()
        return np.random.default_rng(int.from_bytes(h, "little"))

    def evaluate(self, nd: Node, which: np.ndarray | None = None) -> None:
        """k trials on each task of `which` (default: every task)."""
        which = np.ones(len(self.tasks), dtype=bool) if which is None else which
        probs = np.array([self.p(t, set(nd.markers)) if on else 0.0 for t, on in zip(self.tasks, which)])
        nd.s = nd.s + self._rng(",".join(sorted(nd.markers)), nd.evals).binomial(self.k, probs) * which
        nd.n = nd.n + self.k * which
        nd.evals += 1
        self.spent += self.k * int(which.sum())

    def add(self, parent: int | None, markers: frozenset, named: set[str] | None = None) -> Node:
        z = np.zeros(len(self.tasks))
        nd = Node(id=len(self.nodes), parent=parent, markers=markers, s=z, n=z.copy())
        self.nodes.append(nd)
        if named is None:
            self.evaluate(nd)
            return nd
        nd.named = np.array([t in named for t in self.tasks])
        sample = self._rng("sample", nd.id).random(len(self.tasks)) < self.cfg.eval_share
        self.evaluate(nd, nd.named | sample)
        return nd

    # -------------------------------------------------------------- the search
    def choose(self, current: int, step: int) -> int:
        mu, sd = self.estimates()
        live = [nd.id for nd in self.nodes if not nd.pruned]
        if self.cfg.select == "line" or not live:
            return current
        if self.cfg.select == "thompson":
            draws = self._rng("select", step).normal(mu[live], np.maximum(sd[live], 1e-9))
            return live[int(np.argmax(draws))]
        best = float(mu.max())
        z = (mu[live] - best) / np.maximum(sd[live], 1e-9)
        pdf, cdf = np.exp(-z * z / 2) / math.sqrt(2 * math.pi), 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
        ei = (mu[live] - best) * cdf + sd[live] * pdf
        return live[int(np.argmax(ei))]

    def prune(self) -> None:
        mu, sd = self.estimates()
        best = float(mu.max())
        for nd in self.nodes:
            if not nd.pruned and mu[nd.id] + self.cfg.prune_z * sd[nd.id] < best:
                nd.pruned = True

    def run(self, propose: Proposer, budget: int) -> SearchResult:
        rnd = self.k * len(self.tasks)
        reserve = self.cfg.final_top * rnd
        current = self.add(None, frozenset()).id
        self.seen = {frozenset(): 0}
        step = 0
        while self.spent + rnd + reserve <= budget and step < 10 * budget // rnd + 10:
            step += 1
            parent = self.nodes[self.choose(current, step)]
            nth, parent.children = parent.children, parent.children + 1
            proposed = propose(parent.markers, nth, step)
            before = len(self.nodes)
            if self.cfg.select == "line" or not self.cfg.split:  # one child: the round's harness
                self._child(parent, proposed)
            else:
                self._split(parent, proposed, budget - reserve)
            parent.dry = 0 if len(self.nodes) > before else parent.dry + 1
            if parent.dry >= 3 and self.cfg.select != "line":  # exhausted: its proposals are all in the archive
                parent.pruned = True
            mu, _ = self.estimates()
            last = self.nodes[-1].id
            if self.cfg.select == "line" and mu[last] > mu[current]:
                current = last
            if self.cfg.select != "line":
                self.prune()
        return self._finish(budget, rnd, current, step)

    def _child(self, parent: Node, proposed: list[tuple[str, list[str]]]) -> Node | None:
        markers = parent.markers | {u for u, _ in proposed}
        if markers in self.seen:  # nothing new, or a harness some branch already holds: not evaluated again
            return None
        child = self.add(parent.id, markers, {t for _, named in proposed for t in named})
        self.seen[markers] = child.id
        return child

    def _split(self, parent: Node, proposed: list[tuple[str, list[str]]], budget: int) -> None:
        """One child per proposed change (each judged alone), then, when two or more beat their parent,
        their merge (the kept changes together, judged like any child)."""
        kids = []
        for change in proposed:
            if self.spent + self.k * len(self.tasks) > budget:
                return
            kid = self._child(parent, [change])
            if kid is not None:
                kids.append((kid, change))
        mu, _ = self.estimates()
        good = [c for kid, c in kids if mu[kid.id] > mu[parent.id]]
        if self.cfg.merge and len(good) > 1 and self.spent + self.k * len(self.tasks) <= budget:
            self._child(parent, good)

    def _finish(self, budget: int, rnd: int, current: int, steps: int) -> SearchResult:
        mu, _ = self.estimates()
        pool = [current] if self.cfg.select == "line" else [nd.id for nd in self.nodes]
        if self.cfg.select == "line":  # the line's H_best: the best estimate on its path
            path, i = [], current
            while i is not None:
                path.append(i)
                i = self.nodes[i].parent
            pool = path
        checked: set[int] = set()
        for _ in range(self.cfg.final_top):  # a race: a full round on whichever node leads now
            if self.spent + rnd > budget:
                break
            lead = max(pool, key=lambda i: mu[i])
            self.evaluate(self.nodes[lead])
            checked.add(lead)
            mu, _ = self.estimates()
        best = max(checked or pool, key=lambda i: mu[i])
        return SearchResult(markers=self.nodes[best].markers, trials=self.spent, expansions=steps, nodes=self.nodes)
