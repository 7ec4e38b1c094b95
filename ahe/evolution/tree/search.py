"""`search: tree`: the round's expansion (prune; under a budget, allocate: the children the round
affords and the branches stopped; choose parents; evolve the children one by one, evaluate them side
by side; one merge) and the line's next harness — the best new node, else the best node."""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING

from ahe.evolution.search import Expansion
from ahe.evolution.tree.archive import Node, RoundRecord, Tree, load_tree, save_tree
from ahe.evolution.tree.crossing import RoundSpend
from ahe.evolution.tree.crossing import words as crossing_words
from ahe.evolution.tree_budget import allocate
from ahe.evolution.tree_choice import choose_expansions, prunable
from ahe.harness.manifest import ChangeEntry, Manifest
from ahe.llm.types import Usage

if TYPE_CHECKING:
    from ahe.config import ExperimentConfig
    from ahe.evolution.context import PhaseContext


def _prune(tree: Tree, z: float, keep: str) -> list[str]:
    evaluated = [n for n in tree.nodes if n.n_trials > 0]
    gone = sorted(prunable([n.choice() for n in evaluated], z=z) - {keep})
    for nid in gone:
        tree.node(nid).pruned = True
    return gone


def _line(tree: Tree, new: list[Node]) -> Node:
    """The best new node this round (judged next by the loop's attribution), else the best node."""
    pool = new or [n for n in tree.nodes if not n.pruned and (n.n_trials > 0 or n.kind == "rollback")] or tree.nodes
    return max(pool, key=lambda n: (n.estimate()[0], n.n_trials, [-ord(c) for c in n.id]))


def _allocate(ctx: "PhaseContext", tree: Tree, it: int, rec: RoundRecord) -> int:
    """The children this round affords under the run's budgets (width without one); marks the branches
    the budget's rule stops. Nothing affordable ends the run (BudgetSpent) with a judged best."""
    from ahe.evolution.context import BudgetSpent
    from ahe.evolution.tree.budget import spends, words

    st = ctx.cfg.tree
    budgets = spends(ctx, it)
    # every round judges every branch again: one stopped earlier may be the best left now
    alloc = allocate([n.choice().model_copy(update={"stopped": False}) for n in tree.nodes], budgets, width=st.width,
                     rounds_left=ctx.cfg.iterations - it + 1, stop_share=st.stop_share)
    bind = next((b for b in budgets if b.unit == alloc.unit), None)
    rec.budget, rec.merge_fits = words(bind, alloc.slots, alloc.affordable), alloc.merge
    for n in tree.nodes if alloc.slots else []:
        n.stopped = f"iteration {it}: {alloc.stopped[n.id]}" if n.id in alloc.stopped else None
    rec.stopped = sorted(alloc.stopped)
    if rec.budget:
        stopped = f"; stopped {', '.join(rec.stopped)}" if rec.stopped else ""
        ctx.run.history(f"  - search tree budget, iteration {it}: {rec.budget}{stopped}")
    if alloc.slots == 0:
        save_tree(ctx.run, tree)
        raise BudgetSpent(f"the {alloc.unit} budget affords no more child in iteration {it} "
                          f"(a child costs {bind.child:,.6g}, {bind.left - bind.reserve:,.6g} left after the next line rollout)")
    return alloc.slots


async def _children(ctx: "PhaseContext", tree: Tree, it: int, rec: RoundRecord, width: int,
                    spend: RoundSpend) -> tuple[Usage, Usage, list[Node]]:
    """The round's evolve calls one after the other, then their children's evaluations side by side
    (asyncio.gather: under `executor: ray` on the cluster at once); children adopted in call order.
    A budget crossed meanwhile starts nothing more that spends it (ahe.evolution.tree.crossing)."""
    from ahe.evolution.context import StopRequested
    from ahe.evolution.tree.children import adopt_child, evaluate_proposal, propose, recorded

    evolve, rollouts, new, todo, skipped = Usage(), Usage(), [], [], 0
    for i, parent_id in enumerate(rec.expansions, 1):
        if i <= len(rec.children):  # made before a kill: counted (read back from its folder), not made again
            made = recorded(ctx, tree, it, i, rec.children[i - 1])
            evolve, rollouts = evolve.add(made.evolve), rollouts.add(made.rollouts)
            spend.add("evolve", made.evolve)
            spend.add("agent", made.rollouts)
            new += [made.node] if made.node else []
            continue
        if spend.skip("evolve", f"tree child {i}'s evolve call", f"tree child {i - 1}'s evolve call" if i > 1 else "the line rollout"):
            skipped += 1
            continue
        node_no = len(tree.nodes) + sum(1 for p in todo if p.accepted)  # adopted in call order, after all evaluations
        todo.append(await propose(ctx, tree, it, i, tree.node(parent_id), width, node_no))
        spend.add("evolve", todo[-1].usage)
        if ctx.should_stop():
            raise StopRequested()
    save_tree(ctx.run, tree)
    for p in todo:  # the evaluations start together: a budget crossed by the evolve calls starts none
        if p.accepted and spend.skip("agent", f"tree child {p.i}'s evaluation", "the round's evolve calls"):
            p.accepted = []
    # one bound on the round's trials at once: `concurrency` over all its children (Ray: the nodes' CPUs)
    limit = asyncio.Semaphore(ctx.cfg.concurrency) if ctx.executor is None else None
    results = await asyncio.gather(*(evaluate_proposal(ctx, it, p, limit) for p in todo))
    if ctx.should_stop():
        raise StopRequested()
    for p, res in zip(todo, results):
        made = adopt_child(ctx, tree, it, p, res)
        evolve, rollouts = evolve.add(made.evolve), rollouts.add(made.rollouts)
        spend.add("agent", made.rollouts)
        rec.children.append(made.node.id if made.node else None)
        new += [made.node] if made.node else []
    rec.children += [None] * skipped  # evolve calls never made (a resumed round skips them again)
    save_tree(ctx.run, tree)
    return evolve, rollouts, new


class TreeSearch:
    name = "tree"

    def children(self, cfg: "ExperimentConfig") -> int:
        return cfg.tree.width

    async def expand(self, ctx: "PhaseContext", it: int, prior: tuple[ChangeEntry, ...]) -> Expansion:
        from ahe.evolution.tree.merge import try_merge
        from ahe.evolution.tree.sync import sync
        from ahe.harness.manifest import write_manifest
        from evolve_agent.summary import write_summary

        st = ctx.cfg.tree
        tree = load_tree(ctx.run)
        head = sync(ctx, tree, it)
        rec = tree.round(it)
        if not rec.expansions:
            rec.pruned = _prune(tree, st.prune_z, keep=head.id)
            slots = _allocate(ctx, tree, it, rec)
            rng = random.Random(st.seed * 1000 + it)
            rec.expansions = choose_expansions([n.choice() for n in tree.nodes], slots, rng, rule=st.rule)
        save_tree(ctx.run, tree)
        spend = RoundSpend.start(ctx, rec)
        evolve, rollouts, new = await _children(ctx, tree, it, rec, st.width, spend)
        if st.merge and rec.merge_fits and not spend.skip("agent", "the merge", "the children's evaluations"):
            made = await try_merge(ctx, tree, it)
            if made is not None:
                rollouts = rollouts.add(made.rollouts)
                new += [made.node] if made.node and made.node not in new else []
        line = _line(tree, new)
        rec.line, rec.done = line.id, True
        if rec.crossed:
            ctx.run.history(f"  - search tree budget, iteration {it}: {crossing_words(rec)}")
        save_tree(ctx.run, tree)
        base = ctx.repo.head()
        ctx.repo.repo.git.reset("--hard", "-q", line.commit)
        held = tree.changes_on(head.id)
        changes = [e for e in tree.entries_on(line.id) if e.id not in held]
        manifest = Manifest(iteration=it, base_commit=base, head_commit=line.commit, changes=changes,
                            usage={k: v for k, v in evolve.model_dump().items() if isinstance(v, (int, float))})
        manifest.gate_notes.append(f"search tree: the line continues from {line.id} ({line.commit[:10]}); "
                                   f"expanded {', '.join(rec.expansions) or 'nothing'} (tree.json)")
        out = ctx.run.iteration(it).evolve
        out.mkdir(parents=True, exist_ok=True)
        write_manifest(out / "manifest.json", manifest)
        write_summary(out / "summary.md", manifest)
        return Expansion(manifest=manifest, usage=evolve, child_rollouts=rollouts)


TREE = TreeSearch()
