"""The product's `search: tree` (ahe.evolution.tree) mirrored in the simulator (docs/search.md,
"What the product's `search: tree` measures").

`ahe.simulate.search.tree.TreeSearch` (`tree-ei`) is the simulator's own search: children evaluated on
their manifests' named tasks and 5 % of the others, per-task estimates that inherit the parent's
evidence, every child judged by the expected-value rule. This module follows the product's code
instead, one iteration of `ahe evolve` at a time:

1. the loop's rollout: a full round (k trials on every task) on the line's harness, pooled into its
   node (`tree.sync.add_evidence`); from iteration 2 the loop's attribution judges the changes the line
   holds and the previous loop harness lacks, on the loop's rounds only (the joint model reads the
   iterations' rollouts, not the tree's folders), by the simulator's line verdict (`TreeSearch.p_above`'s
   expected-value functions, the last look's bar); failing changes are rolled back as one unit: a
   `rollback` node (not evaluated: Beta(1, 1), mean 0.5), its parent marked exhausted (`tree.sync`);
2. the evolve phase (`tree.search.TreeSearch.expand`): prune (z = 3, evaluated nodes, never the head);
   `tree_budget.allocate` gives the children this round affords (one currency: a child = an evolve call
   at PRICE + a full round, the next line rollout kept free; `rounds_left` from `iterations`);
   `choose_expansions` (rule ei, over every node, the rollback node's 0.5 included) picks the parents;
   each child is evaluated on a full round; a call that proposes nothing new marks its parent exhausted;
   one merge try (`merge.candidates`: the best pair of unpruned evaluated nodes each holding a change the
   other lacks; simulated changes never share a file, so git merges them) when one more round fits;
   the line continues from the best NEW node by estimate (`search._line`), else the best node;
3. the end (`tree.finish`): after `iterations` a final loop round on the line (and its attribution); the
   `finalists` = 2 best estimates (rollback nodes included) get a full round each unless a budget ended
   the run; `best` = the best estimate among the evaluated finalists.

A node's estimate is the archive's (`ahe.evolution.tree.archive.Node.estimate`: one Beta(1 + passed,
1 + failed) over all its trials). Trials are binomial draws keyed like TreeSearch's (the key, the
harness's markers, how often that harness was evaluated), so a harness both searches evaluate sees
the same trials. Where the product is ambiguous here, the choice is written at the place it is made.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from ahe.evolution.evidence import Counts, fit_prior
from ahe.evolution.expected_value import keep_bar
from ahe.evolution.tree.archive import Node as ArchiveNode
from ahe.evolution.tree_budget import Spend, allocate
from ahe.evolution.tree_choice import TreeNode, choose_expansions, finalists, prunable
from ahe.simulate.search.tree import Proposer, TreeSettings, keyed_rng, p_above_clutter


def _index(node_id: str) -> int:
    """node-NNN's place in the archive (nodes are numbered in the order they are added)."""
    return int(node_id.split("-")[1])


INHERIT = TreeSettings()  # diagnostic `per_task`: TreeSearch's inheritance (its defaults, 40 trials unnamed, 1 named)


class ProductSettings(BaseModel):
    """The product's `tree:` defaults (ahe.config.TreeSettings), plus the simulator's currency."""

    width: int = 2
    prune_z: float = 3.0
    finalists: int = 2
    merge: bool = True
    seed: int = 0
    stop_share: float = 0.25
    call_price: float = Field(default=0.0, ge=0, description="an evolve call in trials (the budget's one currency)")
    # diagnostics (docs/search.md): one knob at a time towards the simulator's tree-ei; the product is all off
    eval_share: float = Field(default=1.0, gt=0, le=1, description="a child's round: its named tasks and this share of the others")
    child_verdict: bool = Field(default=False, description="judge every child by the expected-value rule on its own round (rejected: pruned)")
    line_round: bool = Field(default=True, description="the loop's full round on the line's harness each iteration, with its attribution")
    spread: bool = Field(default=True, description="allocate spreads the affordable children over the rounds left of `iterations`")
    per_task: bool = Field(default=False, description="estimates per task, a child inheriting its parent's (TreeSearch.posteriors, tree-ei's 40 / 1)")
    # the remaining differences to tree-ei (docs/search.md, "Which difference matters", 7 Dec night); all off: the product
    final_share: float = Field(default=0.0, ge=0, le=1, description="finalists' full rounds reserved from the budget, as tree-ei: "
                               "min(finalists, share x the budget's rounds), run even when the budget ended the run (0: finish.py's rule)")
    ancestor_verdict: bool = Field(default=False, description="child_verdict per task against the nearest ancestor that ran it "
                                   "(TreeSearch.p_above), not only on the tasks the parent itself ran")
    dedupe: bool = Field(default=False, description="a harness the archive holds is not evaluated again; a parent is exhausted after "
                         "3 such calls in a row (TreeSearch's seen / dry), not after one call proposing nothing")
    merge_rule: Literal["product", "tree"] = Field(default="product", description="tree: TreeSearch._merge_branches' pair (the best "
                                                   "live node and the best of the next 5 holding changes it lacks, union not yet seen)")
    reserve_line: bool = Field(default=True, description="allocate keeps the next line rollout free (False, with line_round False: "
                               "nothing kept free for a round that never runs)")
    rollback_prior: Literal["beta11", "parent"] = Field(default="beta11", description="parent: a rollback node not yet run borrows "
                                                        "its parent's estimate instead of Beta(1, 1)'s 0.5 +- 0.29")


@dataclass(eq=False)
class PNode:
    arch: ArchiveNode  # the product's node: counts, pruned, exhausted, kind (estimate() and choice() are the product's)
    markers: frozenset
    s: np.ndarray  # per task: passes over every trial (pooled, as the archive pools)
    n: np.ndarray
    ls: np.ndarray  # ... of the loop's rounds only (what the loop's attribution reads)
    ln: np.ndarray
    named: set[str] = field(default_factory=set)  # tasks the manifests of its new changes name
    rolled_back: set[str] = field(default_factory=set)
    children: int = 0
    dry: int = 0  # diagnostic `dedupe`: evolve calls from it in a row that proposed no new harness


@dataclass
class ProductResult:
    markers: frozenset
    trials: int
    expansions: int
    cost: float
    nodes: list[PNode]
    iterations: int  # loop iterations begun
    rollbacks: int
    reason: str  # "iterations" or "budget"

    @property
    def pruned(self) -> int:
        return sum(1 for n in self.nodes if n.arch.pruned)


class ProductTree:
    def __init__(self, p, tasks: list[str], k: int, key: str, settings: ProductSettings) -> None:
        self.p, self.tasks, self.k, self.key, self.cfg = p, tasks, k, key, settings
        self.nodes: list[PNode] = []
        self.spent, self.calls, self.rollbacks = 0, 0, 0
        self.evals: dict[frozenset, int] = {}  # harness -> evaluations so far (the trials' key)
        self.named_of: dict[str, list[str]] = {}
        self.tried: set[frozenset] = set()  # merge pairs tried (merge.candidates: a pair once)
        self.seen: set[frozenset] = set()  # every node's harness (diagnostics `dedupe`, merge_rule tree)
        self.final = 0  # diagnostic `final_share`: finalists' rounds reserved from the budget

    # -------------------------------------------------------------- the world
    @property
    def rnd(self) -> int:
        return self.k * len(self.tasks)

    @property
    def cost(self) -> float:
        return self.spent + self.calls * self.cfg.call_price

    def evaluate(self, nd: PNode, loop: bool = False, which: np.ndarray | None = None) -> None:
        """k trials on every task (or `which`), pooled into the node; `loop`: a loop rollout (attribution reads it)."""
        which = np.ones(len(self.tasks), dtype=bool) if which is None else which
        probs = np.array([self.p(t, set(nd.markers)) if on else 0.0 for t, on in zip(self.tasks, which)])
        e = self.evals.get(nd.markers, 0)
        self.evals[nd.markers] = e + 1
        s = keyed_rng(self.key, ",".join(sorted(nd.markers)), e).binomial(self.k, probs) * which
        nd.s, nd.n = nd.s + s, nd.n + self.k * which
        if loop:
            nd.ls, nd.ln = nd.ls + s, nd.ln + self.k * which
        nd.arch.n_trials, nd.arch.n_passed = int(nd.n.sum()), int(nd.s.sum())
        self.spent += self.k * int(which.sum())

    def add(self, parent: PNode | None, markers: frozenset, kind: str, named: set[str] | None = None) -> PNode:
        z = np.zeros(len(self.tasks))
        arch = ArchiveNode(id=f"node-{len(self.nodes):03d}", commit="", parent=parent.arch.id if parent else None, kind=kind)
        nd = PNode(arch=arch, markers=markers, s=z, n=z.copy(), ls=z.copy(), ln=z.copy(), named=named or set())
        self.nodes.append(nd)
        self.seen.add(markers)
        return nd

    def node(self, nid: str) -> PNode:
        return self.nodes[_index(nid)]

    def estimates(self) -> list[tuple[float, float]]:
        """Per node (mean, sd): the archive's pooled Beta; diagnostic `per_task`: TreeSearch's per-task posterior."""
        if not self.cfg.per_task:
            out: list[tuple[float, float]] = []
            for n in self.nodes:  # diagnostic rollback_prior parent: a rollback not yet run reads as its parent
                unrun = self.cfg.rollback_prior == "parent" and n.arch.kind == "rollback" and n.arch.n_trials == 0
                out.append(out[_index(n.arch.parent)] if unrun else n.arch.estimate())
            return out
        ab, out, t = [], [], len(self.tasks)
        for nd in self.nodes:
            if nd.arch.parent is None:
                a0 = b0 = np.full(t, 0.5)
            else:
                pa, pb = ab[_index(nd.arch.parent)]
                named = np.array([x in nd.named for x in self.tasks])
                scale = np.minimum(1.0, np.where(named, INHERIT.inherit_named, INHERIT.inherit) / (pa + pb))
                a0, b0 = scale * pa + 0.05, scale * pb + 0.05
            a, b = a0 + nd.s, b0 + nd.n - nd.s
            ab.append((a, b))
            out.append((float((a / (a + b)).mean()), float(math.sqrt((a * b / ((a + b) ** 2 * (a + b + 1))).sum()) / t)))
        return out

    def choices(self, nodes: list[PNode] | None = None) -> list[TreeNode]:
        """The archive as `tree_choice` reads it (Node.choice, with `estimates()`)."""
        est = self.estimates()
        pick = lambda n: est[_index(n.arch.id)]  # noqa: E731
        return [n.arch.choice().model_copy(update={"mean": pick(n)[0], "sd": pick(n)[1]}) for n in (self.nodes if nodes is None else nodes)]

    def _key(self, est):
        return lambda n: (est[_index(n.arch.id)][0], n.arch.n_trials, [-ord(c) for c in n.arch.id])

    # -------------------------------------------------------------- the loop's attribution
    def p_above(self, after: PNode, before: PNode, new: set[str], loop: bool = True) -> float:
        """TreeSearch.p_above's rule: per task both sides ran, the spike-and-slab effect (prior P(moved): a
        task the new changes name 1/2, another UNNAMED_MOVES/tasks capped at UNNAMED_CAP); P(> the clutter cost)."""
        named = {x for u in new for x in self.named_of.get(u, [])}
        (sa, na), (sb, nb) = ((after.ls, after.ln), (before.ls, before.ln)) if loop else ((after.s, after.n), (before.s, before.n))
        if not loop and self.cfg.ancestor_verdict:  # diagnostic: per task the nearest ancestor that ran it (TreeSearch._ancestor)
            anc = {int(i): self._ran(before, int(i)) for i in np.flatnonzero(na > 0)}
            looks = ((i, Counts(int(a.s[i]), int(a.n[i])), Counts(int(sa[i]), int(na[i])), self.tasks[i] in named)
                     for i, a in anc.items() if a.n[i] > 0)
            return p_above_clutter(self.tasks, looks, self.prior)
        looks = ((int(i), Counts(int(sb[i]), int(nb[i])), Counts(int(sa[i]), int(na[i])), self.tasks[i] in named)
                 for i in np.flatnonzero((na > 0) & (nb > 0)))
        return p_above_clutter(self.tasks, looks, self.prior)

    def _ran(self, nd: PNode, i: int) -> PNode:
        """`nd`, or its nearest ancestor that ran task i (the seed ran every task)."""
        while nd.n[i] == 0 and nd.arch.parent is not None:
            nd = self.node(nd.arch.parent)
        return nd

    def line_round(self, line: PNode, prev: PNode | None, head: PNode | None) -> PNode:
        """The loop's rollout on the line, then the attribution of the changes the line holds and the head
        lacks (against the previous loop harness), and the rollback. Returns the new head."""
        self.evaluate(line, loop=True)
        new = set(line.markers - head.markers) if head is not None else set()
        if prev is None or not new or self.p_above(line, prev, new) >= keep_bar(final=True):
            return line
        # the changes judged as one unit, as the simulator's line judges a round (the product: per change, joint model)
        self.rollbacks += 1
        line.arch.exhausted = True
        kid = self.add(line, line.markers - new, "rollback")
        kid.rolled_back = new
        return kid

    # -------------------------------------------------------------- the evolve phase
    def _slots(self, it: int, iterations: int, budget: float | None) -> tuple[int, bool]:
        if budget is None:
            return self.cfg.width, True
        spend = Spend(unit="trials+calls", left=budget - self.cost, evolve_call=self.cfg.call_price,
                      evaluation=float(self._child_round()), reserve=float(self.rnd) if self.cfg.reserve_line else 0.0)
        alloc = allocate([c.model_copy(update={"stopped": False}) for c in self.choices()], [spend],
                         width=self.cfg.width, rounds_left=iterations - it + 1 if self.cfg.spread else 1, stop_share=self.cfg.stop_share)
        for n in self.nodes:
            n.arch.stopped = "budget" if n.arch.id in alloc.stopped else None
        return alloc.slots, alloc.merge

    def _child_round(self) -> int:
        return self.rnd if self.cfg.eval_share >= 1 else int(math.ceil(self.rnd * min(1.0, self.cfg.eval_share + 0.1)))

    def expand(self, it: int, iterations: int, head: PNode, propose: Proposer, budget: float | None) -> PNode | None:
        """One `TreeSearch.expand`: the line's next node, or None when the budget affords no child."""
        evaluated = [n for n in self.nodes if n.arch.n_trials > 0]
        for nid in sorted(prunable(self.choices(evaluated), z=self.cfg.prune_z) - {head.arch.id}):
            self.node(nid).arch.pruned = True
        slots, merge_fits = self._slots(it, iterations, budget)
        if slots == 0:
            return None
        picks = choose_expansions(self.choices(), slots, random.Random(self.cfg.seed * 1000 + it), rule="ei")
        todo = []
        for pid in picks:  # the evolve calls one after the other (a parent exhausted by an earlier call is still called)
            parent = self.node(pid)
            self.calls += 1
            proposed = propose(parent.markers, parent.children, self.calls)
            parent.children += 1
            self.named_of.update({u: list(named) for u, named in proposed})
            markers = parent.markers | {u for u, _ in proposed}
            if self.cfg.dedupe:  # diagnostic: TreeSearch's seen / dry (a known harness is not evaluated again)
                parent.dry = parent.dry + 1 if markers in self.seen else 0
                parent.arch.exhausted = parent.arch.exhausted or parent.dry >= 3
                if parent.dry:
                    continue
            elif markers == parent.markers:  # nothing new: the parent is exhausted (children.propose)
                parent.arch.exhausted = True
                continue
            todo.append(self.add(parent, markers, "child", {t for u, _ in proposed if u not in parent.markers for t in self.named_of[u]}))
        for kid in todo:  # then their evaluations
            self._child_eval(kid)
        new = list(todo)
        if self.cfg.merge and merge_fits:
            made = self._merge_tree() if self.cfg.merge_rule == "tree" else self._merge()
            if made is not None:
                new.append(made)
        pool = new or [n for n in self.nodes if not n.arch.pruned and (n.arch.n_trials > 0 or n.arch.kind == "rollback")] or self.nodes
        return max(pool, key=self._key(self.estimates()))

    def _child_eval(self, kid: PNode) -> None:
        if self.cfg.eval_share >= 1:
            self.evaluate(kid)
        else:  # diagnostic: named tasks and a share of the others (no inheritance: the archive's pooled estimate)
            sample = keyed_rng(self.key, "sample", kid.arch.id).random(len(self.tasks)) < self.cfg.eval_share
            self.evaluate(kid, which=sample | np.array([t in kid.named for t in self.tasks]))
        if self.cfg.child_verdict:  # diagnostic: the child judged against its parent on every trial both hold
            parent = self.node(kid.arch.parent)
            if self.p_above(kid, parent, set(kid.markers - parent.markers), loop=False) < keep_bar(final=True):
                kid.arch.pruned = True

    def _merge(self) -> PNode | None:
        """merge.candidates' first pair, merged (distinct files) into a child of the better one, evaluated."""
        nodes = [n for n in self.nodes if n.arch.n_trials > 0 and n.arch.kind != "rollback" and not n.arch.pruned]
        pairs, est = [], self.estimates()
        mean = lambda n: est[_index(n.arch.id)][0]  # noqa: E731
        for i, a in enumerate(nodes):
            for b in nodes[i + 1:]:
                if frozenset((a.arch.id, b.arch.id)) in self.tried or not (a.markers - b.markers) or not (b.markers - a.markers):
                    continue
                base, other = (a, b) if mean(a) >= mean(b) else (b, a)
                pairs.append((base, other))
        if not pairs:
            return None
        base, other = min(pairs, key=lambda p: (-(mean(p[0]) + mean(p[1])), p[0].arch.id, p[1].arch.id))
        self.tried.add(frozenset((base.arch.id, other.arch.id)))
        gone = self._rolled_back_on(base) | self._rolled_back_on(other)  # git's three-way merge keeps a revert
        kid = self.add(base, (base.markers | other.markers) - gone, "merge",
                       {t for u in other.markers - base.markers for t in self.named_of.get(u, [])})
        self._child_eval(kid)
        return kid

    def _merge_tree(self) -> PNode | None:
        """Diagnostic merge_rule tree (TreeSearch._merge_branches): the best live evaluated node and the first of the
        next five best that each hold changes the other lacks, their union not in the archive; a child of the best."""
        est = self.estimates()
        live = sorted((n for n in self.nodes if not n.arch.pruned and n.arch.parent is not None and n.arch.n_trials > 0),
                      key=lambda n: (-est[_index(n.arch.id)][0], _index(n.arch.id)))[:6]
        for b in live[1:]:
            a = live[0]
            theirs = b.markers - a.markers
            if not theirs or not (a.markers - b.markers) or (a.markers | b.markers) in self.seen:
                continue
            kid = self.add(a, a.markers | theirs, "merge", {t for u in theirs for t in self.named_of.get(u, [])})
            self._child_eval(kid)
            return kid
        return None

    def _rolled_back_on(self, nd: PNode) -> set[str]:
        out, cur = set(), nd
        while cur is not None:
            out |= cur.rolled_back
            cur = self.node(cur.arch.parent) if cur.arch.parent else None
        return out

    # -------------------------------------------------------------- the run
    def run(self, propose: Proposer, budget: float | None, iterations: int) -> ProductResult:
        """`ahe evolve` with `search: tree` for `iterations` (and, with `budget`, the run's one budget)."""
        seed = self.add(None, frozenset(), "seed")
        head = self.line_round(seed, None, None)
        self.prior = fit_prior([Counts(int(s), int(n)) for s, n in zip(seed.s, seed.n)])
        prev, reason, it = seed, "iterations", 1
        if budget is not None and self.cfg.final_share > 0:  # diagnostic: tree-ei's reserve for the finalists' rounds
            self.final = min(self.cfg.finalists, int(self.cfg.final_share * budget / self.rnd))
        room = None if budget is None else budget - self.final * self.rnd
        for it in range(1, iterations + 1):
            line = self.expand(it, iterations, head, propose, room)
            if line is None:
                reason = "budget"
                break
            if room is not None and self.cost + self.rnd > room:  # the loop's budget check (kept free: never binds)
                reason = "budget"
                break
            head, prev = (self.line_round(line, prev, head) if self.cfg.line_round else line), line  # iteration it + 1's rollout
        return self._finish(reason, budget, it)

    def _finish(self, reason: str, budget: float | None, it: int) -> ProductResult:
        pool = [n for n in self.nodes if n.arch.n_trials > 0 or n.arch.kind == "rollback"]
        fin = finalists(self.choices(pool), max(self.final, 1) if self.final else self.cfg.finalists)
        if reason != "budget" or self.final:
            for nid in fin:  # a round each, when it fits (finish._round_fits: the budget, if any)
                if budget is None or self.cost + self.rnd <= budget:
                    self.evaluate(self.node(nid))
        judged = [self.node(i) for i in fin if self.node(i).arch.n_trials > 0] or [n for n in self.nodes if n.arch.n_trials > 0]
        best = max(judged, key=self._key(self.estimates()))
        return ProductResult(markers=best.markers, trials=self.spent, expansions=self.calls, cost=self.cost, nodes=self.nodes,
                             iterations=it, rollbacks=self.rollbacks, reason=reason)
