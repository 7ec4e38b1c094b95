"""Search over an archive of evaluated harnesses in the simulator (docs/search-simulator.md).

Every node is a harness (a set of change markers) with the trials it was evaluated on. Its
estimate of true pass@1 and the uncertainty of it come from a per-task Beta model in which a
child inherits its parent's posterior as `inherit` trials of evidence per task (a child
differs from its parent on the few tasks its changes touch, so the untouched tasks borrow the
parent's trials; the touched ones are soon decided by the child's own). Each step:

1. choose the node to expand — `thompson` (a draw from every live node's posterior, the
   highest draw wins), `ei` (the highest expected improvement over the best estimate; with
   `thompson_after`, Thompson once that many full rounds are spent), or
   `line` (the paper's line in the same machinery: always the current node; the line moves to
   a child whose estimate beats it, else stays — a rollback of the whole child);
2. the evolve agent proposes from that parent (`propose(markers, nth, step)`); a child whose
   harness is already in the archive is not evaluated again (the digest of what was tried);
3. the child is evaluated, k trials a task, on the tasks its manifests name and a random
   `eval_share` of the others (1.0: a full round); the rest it inherits from its parent.
   A rejected child with P(above the clutter cost) ≥ `relook` gets up to `relooks` more looks
   first (off by default: measured worse, docs/search-simulator.md). Two branches merge when each holds
   changes the other lacks (distinct files, as in the product's merge).
4. with `line_every`, after every that many evolve calls, the product's iteration: a full round on the
   best estimate, then each change on its path re-judged on its named tasks over every round it ran (this
   node against the nearest ancestor without it), the failing ones rolled back in one child;
5. prune: a node whose estimate + `prune_z` σ is below the best estimate can no longer win
   and is not expanded again; nor is a node whose last three evolve calls proposed nothing new.

At the end a full round goes to each of the `final_rounds` best estimates (`final_top`, but at most
`final_share` of the rounds the budget buys: a small budget re-checks nothing and returns the best
estimate); the best of them is returned. The budget is one currency: every trial, the
re-evaluation too, and every evolve call at `call_price` trials.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field
from typing import Callable, Literal

import numpy as np
from pydantic import BaseModel, Field

from ahe.evolution.evidence import Counts, fit_prior
from ahe.evolution.expected_value import CLUTTER, PRIOR_PRECISION, UNNAMED_CAP, UNNAMED_MOVES, keep_bar, task_effect
from ahe.evolution.tree_choice import TreeNode, choose_expansions, finalists, prunable

Select = Literal["thompson", "ei", "line"]
# (parent's markers, its nth child, step) -> the proposed changes: (uid, the tasks its manifest names)
Proposer = Callable[[frozenset, int, int], list[tuple[str, list[str]]]]
COMPONENTS = ("system_prompt", "tools", "skills", "memory")


def component_of(uid: str) -> str:
    """The harness component a simulated change edits (a fixed function of its id)."""
    return COMPONENTS[hashlib.blake2b(uid.encode(), digest_size=2).digest()[0] % len(COMPONENTS)]


def keyed_rng(*parts: object) -> np.random.Generator:
    """A generator fixed by its parts: two searches that key a harness's trials alike see the same trials."""
    h = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return np.random.default_rng(int.from_bytes(h, "little"))


def p_above_clutter(tasks: list[str], looks, prior, sign: float = 1.0) -> float:
    """The expected-value rule over per-task looks (task index, before, after, named by a manifest): the
    spike-and-slab posterior effect per task (prior P(moved): a named task 1/2, another UNNAMED_MOVES/tasks
    capped at UNNAMED_CAP), summed into pass@1; P(effect > the clutter cost). `sign` -1: a rollback saves it."""
    t = len(tasks)
    pa, pb = PRIOR_PRECISION
    mean = var = 0.0
    for i, before, after, named in looks:
        pi = pa / (pa + pb) if named else min(UNNAMED_MOVES / t, UNNAMED_CAP)
        te = task_effect(tasks[i], before, after, prior, pi)
        mean, var = mean + te.mean / t, var + te.var / t ** 2
    cost = sign * CLUTTER / t
    return 0.5 * (1 + math.erf((mean - cost) / math.sqrt(2 * max(var, 1e-18))))


class TreeSettings(BaseModel):
    select: Select = "thompson"
    inherit: float = Field(default=40.0, ge=0, description="trials of its parent's evidence a child inherits on a task its changes do not name")
    inherit_named: float = Field(default=1.0, ge=0, description="... on a task its changes' manifests name (fixes or regressions)")
    eval_share: float = Field(default=0.3, gt=0, le=1, description="share of the unnamed tasks a child is evaluated on (the named ones always)")
    prune_z: float = Field(default=3.0, gt=0)
    final_top: int = Field(default=2, ge=0, description="at most this many full rounds of final re-evaluation")
    final_share: float = Field(default=1.0, ge=0, le=1, description="... and at most this share of the budget's rounds (a small budget re-evaluates less)")
    call_price: float = Field(default=0.0, ge=0, description="what one evolve call costs in trials (the budget's one currency)")
    split: bool = Field(default=False, description="tree: one child per proposed change, instead of one per evolve call")
    merge: bool = Field(default=True, description="tree: merge the children of one parent that beat it")
    thompson_after: float = Field(default=0.0, ge=0, description="tree (ei): switch to thompson once this many full rounds are spent (0: never)")
    relook: float = Field(default=0.0, ge=0, le=0.5, description="tree: a rejected child whose P(above the clutter cost) is at least this gets another look (0: never)")
    relooks: int = Field(default=1, ge=0, description="... at most this many more looks per child")
    pool: bool = Field(default=False, description="tree: a child's verdict on a task one of its new changes names also counts every earlier look at that change (each child that added it, against its own ancestor)")
    rescue: bool = Field(default=False, description="tree (with pool): after each verdict, an earlier rejected child sharing a new change is judged again on the pooled looks, and reopened if it now passes")
    check_every: int = Field(default=0, ge=0, description="tree: after every this many evolve calls, a full round on the best estimate (as the product's loop runs the line's harness each iteration; 0: never)")
    check_drop: bool = Field(default=True, description="... and a checked node the verdict now rejects against its ancestors is pruned")
    drop_every: int = Field(default=0, ge=0, description="tree: after every this many evolve calls, a rollback child of the best estimate without its weakest change (the one whose looks were least convincing), kept when dropping it costs nothing (0: never)")
    topup: int = Field(default=0, ge=0, description="tree: before the verdict, run the compared ancestor on the child's named tasks until it has this many trials there (0: never)")
    again: int = Field(default=0, ge=0, description="tree: a rejected child whose harness an evolve call proposes again gets another look (its looks pooled) and is reopened if the verdict now passes, up to this many more looks (0: the call is wasted)")
    line_stale: int = Field(default=0, ge=0, description="tree: a line round (as `line_every`) after every this many evolve calls whose changes were all already tried on some branch (saturation; 0: never)")
    line_all: bool = Field(default=False, description="... the re-verdict on every task the node ran (the others with the unnamed prior P(moved)), not only the named ones")
    line_every: int = Field(default=0, ge=0, description="tree: after every this many evolve calls, a full round on the best estimate (the product's line round), then each of its kept changes re-judged on its named tasks over every round it ran; the failing ones rolled back in one child (0: never)")


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
    cost: float = 0.0  # trials + evolve calls × call_price

    @property
    def pruned(self) -> int:
        return sum(1 for n in self.nodes if n.pruned)


class TreeSearch:
    def __init__(self, p: Callable[[str, set], float], tasks: list[str], k: int, key: str, settings: TreeSettings) -> None:
        self.p, self.tasks, self.k, self.key, self.cfg = p, tasks, k, key, settings
        self.nodes: list[Node] = []
        self.spent = 0
        self.looks: dict[str, list[int]] = {}  # change -> the children that added it (pooled verdicts)
        self.named_of: dict[str, list[str]] = {}
        self.dropped: dict[int, set[str]] = {}  # node -> the changes a rollback child already tried to drop
        self.calls = 0

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
        return keyed_rng(self.key, *parts)

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
        self._look(nd)
        return nd

    def _look(self, nd: Node) -> None:
        """One look at a child: its named tasks and a fresh random `eval_share` of the others."""
        key = ("sample", nd.id) if nd.evals == 0 else ("sample", nd.id, nd.evals)
        sample = self._rng(*key).random(len(self.tasks)) < self.cfg.eval_share
        self.evaluate(nd, nd.named | sample)

    def judge(self, child: Node, budget: float) -> bool:
        """The verdict, with up to `relooks` more looks while a rejected child's P(above) is at least
        `relook` (value of information: a near miss is worth another look before it is rolled back)."""
        self._top_up(child, budget)
        for _ in range(self.cfg.relooks if self.cfg.relook > 0 else 0):
            p = self.p_above(child)
            if p >= keep_bar(final=True) or p < self.cfg.relook or not self._fits(budget):
                break
            self._look(child)
        kept = self.verdict(child)
        child.pruned = not kept
        if self.cfg.pool and self.cfg.rescue:
            self._rescue(child)
        return kept

    def _rescue(self, child: Node) -> None:
        """Re-judge the rejected children that added one of this child's new changes, on every look now
        pooled; one that passes is reopened (un-pruned: it can be expanded again)."""
        parent = self.nodes[child.parent] if child.parent is not None else child
        for u in child.markers - parent.markers:
            for c in self.looks.get(u, []):
                nd = self.nodes[c]
                if c != child.id and nd.pruned and nd.named is not None and self.verdict(nd):
                    nd.pruned = False

    # -------------------------------------------------------------- the product's rules
    def tree_nodes(self) -> list[TreeNode]:
        """The archive as `ahe.evolution.tree_choice` reads it (the same rules as `search: tree`)."""
        mu, sd = self.estimates()
        return [TreeNode(id=_nid(nd.id), mean=float(min(1.0, max(0.0, mu[nd.id]))), sd=float(sd[nd.id]),
                         parent=None if nd.parent is None else _nid(nd.parent), pruned=nd.pruned, exhausted=nd.dry >= 3)
                for nd in self.nodes]

    def verdict(self, child: Node) -> bool:
        return self.p_above(child) >= keep_bar(final=True)

    def p_above(self, child: Node, sign: float = 1.0) -> float:
        """Keep the child's new changes? The product's expected-value rule (`ahe.evolution.expected_value`):
        per task the child ran, the spike-and-slab posterior effect against the nearest ancestor that ran
        it (prior P(moved): a named task 1/2, another UNNAMED_MOVES/tasks capped at UNNAMED_CAP); kept when
        P(effect on pass@1 > the clutter cost) reaches the last look's bar."""
        pooled = self._earlier_looks(child) if self.cfg.pool else {}

        def looks():
            for i in np.flatnonzero(child.n > 0):
                anc = self._ancestor(child, i)
                before, after = Counts(int(anc.s[i]), int(anc.n[i])), Counts(int(child.s[i]), int(child.n[i]))
                for c in pooled.get(int(i), ()):  # the same change's earlier looks at this task, each against its own ancestor
                    a = self._ancestor(c, i)
                    before, after = before + Counts(int(a.s[i]), int(a.n[i])), after + Counts(int(c.s[i]), int(c.n[i]))
                yield int(i), before, after, child.named is not None and bool(child.named[i])
        return p_above_clutter(self.tasks, looks(), self.prior, sign)

    def _ancestor(self, nd: Node, i: int) -> Node:
        """The nearest ancestor of `nd` that ran task i (the root for the root)."""
        anc = self.nodes[nd.parent] if nd.parent is not None else nd
        while anc.n[i] == 0 and anc.parent is not None:
            anc = self.nodes[anc.parent]
        return anc

    def _earlier_looks(self, child: Node) -> dict[int, list[Node]]:
        """Per task one of the child's new changes names: every other child that added such a change and
        ran the task (pooled evidence per change across the archive; each earlier child counted once)."""
        parent = self.nodes[child.parent] if child.parent is not None else child
        index = {t: j for j, t in enumerate(self.tasks)}
        out: dict[int, set[int]] = {}
        for u in child.markers - parent.markers:
            others = [c for c in self.looks.get(u, []) if c != child.id]
            for task in self.named_of.get(u, []):
                j = index.get(task)
                if j is not None and others:
                    out.setdefault(j, set()).update(c for c in others if self.nodes[c].n[j] > 0)
        return {j: [self.nodes[c] for c in sorted(cs)] for j, cs in out.items() if cs}

    def _drop(self, budget: float) -> None:
        """A rollback child: the best estimate without the change whose looks (the children that added it)
        were least convincing, run on that change's named tasks and a sample; kept when P(dropping it
        costs more than the clutter it saves) is below one half."""
        live = [x for x in self.tree_nodes() if not x.pruned]
        if not live or not self._fits(budget):
            return
        nd = self.nodes[int(finalists(live, 1)[0][1:])]
        tried = self.dropped.setdefault(nd.id, set())
        score = {u: float(np.mean([self.p_above(self.nodes[c]) for c in self.looks.get(u, [])] or [1.0]))
                 for u in nd.markers - tried}
        if not score:
            return
        u = min(sorted(score), key=score.get)
        tried.add(u)
        markers = nd.markers - {u}
        if markers in self.seen:
            return
        kid = self.add(nd.id, markers, set(self.named_of.get(u, [])))
        self.seen[markers] = kid.id
        if self.p_above(kid, sign=-1.0) < keep_bar(final=True):
            kid.pruned = True

    def _check(self, budget: float) -> None:
        """A full round on the best estimate: every task it did not run is seen (a harm its manifests did
        not name shows), and its descendants' estimates follow (they inherit its evidence)."""
        if not self._fits(budget):
            return
        unseen = [x for x in self.tree_nodes() if self.nodes[int(x.id[1:])].n.min() == 0]  # not yet run on every task
        if not unseen:
            return
        nd = self.nodes[int(finalists(unseen, 1)[0][1:])]
        self.evaluate(nd)
        if self.cfg.check_drop and nd.parent is not None and not self.verdict(nd):
            nd.pruned = True

    def _line_round(self, budget: float) -> None:
        """The product's iteration on the simulator's archive: a full round on the best live estimate (its
        evidence pools over every round it ran), then per edge of its path the changes that edge added,
        re-judged on their named tasks (`line_all`: every task; this node against the nearest ancestor without them); the changes
        that now fail leave in one rollback child, run on their named tasks and a sample (as `_drop`)."""
        live = [x for x in self.tree_nodes() if not x.pruned]
        if not live or not self._fits(budget):
            return
        nd = self.nodes[int(finalists(live, 1)[0][1:])]
        self.evaluate(nd)
        failed: set[str] = set()
        i = nd.id
        while self.nodes[i].parent is not None:
            c = self.nodes[i]
            added = c.markers - self.nodes[c.parent].markers
            if added and self._reverdict(nd, self.nodes[c.parent], added) < keep_bar(final=True):
                failed |= added & nd.markers
            i = c.parent
        markers = nd.markers - failed
        if not failed or markers in self.seen or not self._fits(budget):
            return
        kid = self.add(nd.id, markers, {t for u in failed for t in self.named_of.get(u, [])})
        self.seen[markers] = kid.id
        if self.p_above(kid, sign=-1.0) < keep_bar(final=True):
            kid.pruned = True

    def _reverdict(self, nd: Node, before_node: Node, changes: set[str]) -> float:
        """P(the changes' effect on their named tasks (`line_all`: on every task) beats the clutter cost): `nd`'s evidence there against
        the nearest ancestor-or-self of `before_node` that ran each task (the expected-value rule's functions)."""
        t = len(self.tasks)
        named = {tk for u in changes for tk in self.named_of.get(u, [])}
        mean = var = 0.0
        for i, task in enumerate(self.tasks):
            if (task not in named and not self.cfg.line_all) or nd.n[i] == 0:
                continue
            anc = before_node if before_node.n[i] > 0 else self._ancestor(before_node, i)
            pi = PRIOR_PRECISION[0] / sum(PRIOR_PRECISION) if task in named else min(UNNAMED_MOVES / t, UNNAMED_CAP)
            te = task_effect(task, Counts(int(anc.s[i]), int(anc.n[i])), Counts(int(nd.s[i]), int(nd.n[i])), self.prior, pi)
            mean, var = mean + te.mean / t, var + te.var / t ** 2
        return 1.0 if var == 0.0 else 0.5 * (1 + math.erf((mean - CLUTTER / t) / math.sqrt(2 * var)))

    def _top_up(self, child: Node, budget: float) -> None:
        """Paired depth: run the parent on the child's named tasks where it has fewer than `topup` trials."""
        if not self.cfg.topup or child.parent is None or child.named is None:
            return
        parent = self.nodes[child.parent]
        need = child.named & (parent.n < self.cfg.topup)
        if need.any() and self.cost + self.k * int(need.sum()) <= budget:
            self.evaluate(parent, need)

    # -------------------------------------------------------------- the search
    def choose(self, current: int, step: int) -> int | None:
        if self.cfg.select == "line":
            return current
        rule = self.cfg.select  # `ei` with `thompson_after`: Thompson once that many full rounds are spent
        if rule == "ei" and 0 < self.cfg.thompson_after <= self.cost / (self.k * len(self.tasks)):
            rule = "thompson"
        picked = choose_expansions(self.tree_nodes(), 1, random.Random(f"{self.key}:select:{step}"), rule=rule)
        return int(picked[0][1:]) if picked else None

    def prune(self) -> None:
        for i in prunable(self.tree_nodes(), z=self.cfg.prune_z):
            self.nodes[int(i[1:])].pruned = True

    @property
    def cost(self) -> float:
        """What the search has spent in the budget's one currency: every trial, and every evolve call at `call_price`."""
        return self.spent + self.calls * self.cfg.call_price

    def final_rounds(self, budget: float) -> int:
        """Full rounds of final re-evaluation: `final_top`, but no more than `final_share` of the rounds the
        budget buys (a budget of a few rounds is better spent on evolve calls than on checking the leader)."""
        return min(self.cfg.final_top, int(self.cfg.final_share * budget / (self.k * len(self.tasks))))

    def run(self, propose: Proposer, budget: float, max_calls: int | None = None) -> SearchResult:
        """Search until the next evolve call and a full round for its child would not fit in `budget`
        (the final re-evaluation's reserved; trials and evolve calls in one currency) or `max_calls`
        evolve calls are spent."""
        rnd = self.k * len(self.tasks)
        self.calls, self.final, self.stale = 0, self.final_rounds(budget), 0
        reserve = self.final * rnd
        current = self.add(None, frozenset()).id
        self.prior = fit_prior([Counts(int(s), int(n)) for s, n in zip(self.nodes[0].s, self.nodes[0].n)])
        self.seen, self.named_of = {frozenset(): 0}, {}
        self.looks: dict[str, list[int]] = {}  # change -> the children that added it (pooled verdicts)
        step, cap = 0, max_calls if max_calls is not None else 10 * int(budget) // rnd + 10
        while self.cost + self.cfg.call_price + rnd + reserve <= budget and step < cap:
            pick = self.choose(current, step + 1)
            if pick is None:  # every node pruned or exhausted
                break
            step += 1
            self.calls += 1
            parent = self.nodes[pick]
            nth, parent.children = parent.children, parent.children + 1
            proposed = propose(parent.markers, nth, step)
            self.stale += bool(proposed) and all(u in self.looks for u, _ in proposed)
            self.named_of.update({u: list(named) for u, named in proposed})
            before = len(self.nodes)
            if self.cfg.select == "line" or not self.cfg.split:  # one child: the round's harness
                kid = self._child(parent, proposed)
                if kid is None and self.cfg.again:
                    self._again(parent, proposed, budget - reserve)
                if kid is not None and self.judge(kid, budget - reserve):
                    current = kid.id  # kept: the line continues from it (rejected: rolled back, never expanded)
                if self.cfg.merge and self.cfg.select != "line":
                    self._merge_branches(budget - reserve)
            else:
                self._split(parent, proposed, budget - reserve)
                if self.cfg.merge:
                    self._merge_branches(budget - reserve)
            parent.dry = 0 if len(self.nodes) > before else parent.dry + 1
            if self.cfg.drop_every and self.cfg.select != "line" and step % self.cfg.drop_every == 0:
                self._drop(budget - reserve)
            if self.cfg.line_every and self.cfg.select != "line" and step % self.cfg.line_every == 0:
                self._line_round(budget - reserve)
            if self.cfg.line_stale and self.cfg.select != "line" and self.stale >= self.cfg.line_stale:
                self.stale = 0
                self._line_round(budget - reserve)
            if self.cfg.check_every and self.cfg.select != "line" and step % self.cfg.check_every == 0:
                self._check(budget - reserve)
            if self.cfg.select != "line":
                self.prune()
        return self._finish(budget, rnd, current, step)

    def _child(self, parent: Node, proposed: list[tuple[str, list[str]]]) -> Node | None:
        markers = parent.markers | {u for u, _ in proposed}
        if markers in self.seen:  # nothing new, or a harness some branch already holds: not evaluated again
            return None
        child = self.add(parent.id, markers, {t for _, named in proposed for t in named})
        self.seen[markers] = child.id
        for u in markers - parent.markers:
            self.looks.setdefault(u, []).append(child.id)
        return child

    def _again(self, parent: Node, proposed: list[tuple[str, list[str]]], budget: float) -> None:
        """The evolve agent proposed a rejected child's harness again: one more look at it (named tasks and
        a fresh sample, pooled with its earlier looks), reopened when the verdict now passes."""
        i = self.seen.get(parent.markers | {u for u, _ in proposed})
        nd = None if i is None else self.nodes[i]
        if nd is None or not nd.pruned or nd.named is None or nd.evals > self.cfg.again or not self._fits(budget):
            return
        self._look(nd)
        nd.pruned = not self.verdict(nd)

    def _fits(self, budget: float) -> bool:
        return self.cost + self.k * len(self.tasks) <= budget

    def _split(self, parent: Node, proposed: list[tuple[str, list[str]]], budget: float) -> None:
        """One child per proposed change, each judged alone by the product's verdict (a rejected child is
        rolled back: not expanded again); then the kept ones on different components, merged."""
        kept = []
        for change in proposed:
            if not self._fits(budget):
                return
            kid = self._child(parent, [change])
            if kid is None:
                continue
            if self.judge(kid, budget):
                kept.append((kid, change))
        mu, _ = self.estimates()
        by_comp: dict[str, tuple] = {}
        for kid, change in sorted(kept, key=lambda x: -mu[x[0].id]):
            by_comp.setdefault(component_of(change[0]), change)
        if self.cfg.merge and len(by_comp) > 1 and self._fits(budget):
            kid = self._child(parent, list(by_comp.values()))
            if kid is not None:
                self.judge(kid, budget)

    def _merge_branches(self, budget: float) -> None:
        """Merge: the best node and the best one of another branch that each hold changes the other lacks
        (on different files, as the product's merge requires); the merge is judged like any child."""
        mu, _ = self.estimates()
        live = sorted((nd for nd in self.nodes if not nd.pruned and nd.parent is not None), key=lambda nd: -mu[nd.id])[:6]
        if len(live) < 2 or not self._fits(budget):
            return
        a = live[0]
        for b in live[1:]:
            mine, theirs = a.markers - b.markers, b.markers - a.markers
            if not mine or not theirs or a.markers | b.markers in self.seen:
                continue
            # each simulated change is its own file (sim/<uid>.md): the two sides never touch one file, so
            # git merges them, as the product's `ahe.evolution.tree.merge` would (it refuses only overlapping files)
            kid = self._child(a, [(u, self.named_of.get(u, [])) for u in sorted(theirs)])
            if kid is not None:
                self.judge(kid, budget)
            return

    def _finish(self, budget: float, rnd: int, current: int, steps: int) -> SearchResult:
        """Line: its H_best, the best estimate on its path. Tree: a full round on each of the
        `final_rounds` finalists (`tree_choice.finalists`), the best estimate of them returned (with
        none: the best estimate of the archive, unchecked)."""
        mu, _ = self.estimates()
        if self.cfg.select == "line":
            path, i = [], current
            while i is not None:
                path.append(i)
                i = self.nodes[i].parent
            best = max(path, key=lambda j: mu[j])
        else:
            cands = [int(x[1:]) for x in finalists(self.tree_nodes(), max(self.final, 1))]
            for i in cands[: self.final]:
                if self.cost + rnd <= budget:
                    self.evaluate(self.nodes[i])
            mu, _ = self.estimates()
            best = max(cands, key=lambda j: mu[j])
        return SearchResult(markers=self.nodes[best].markers, trials=self.spent, expansions=steps, nodes=self.nodes, cost=self.cost)


def _nid(i: int) -> str:
    return f"n{i:05d}"
