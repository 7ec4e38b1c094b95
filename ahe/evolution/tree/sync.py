"""The archive catches up with the loop: the line's rollout of round t is evidence on its node,
and a rollback that moved HEAD adds the harness it left as a `rollback` node (not yet evaluated)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ahe.evolution.tree.archive import Node, Tree
from ahe.rollout.models import RunResults
from ahe.run_folder import HarnessRef, read_model

if TYPE_CHECKING:
    from ahe.evolution.context import PhaseContext


def add_evidence(node: Node, results: RunResults, folder: str) -> None:
    """Pool one evaluation into the node, once per rollout folder (a redone phase adds nothing)."""
    if folder in node.evaluations:
        return
    node.evaluations.append(folder)
    node.n_trials += results.n_trials - results.infra_errors
    node.n_passed += results.n_passed


def sync(ctx: "PhaseContext", tree: Tree, it: int) -> Node:
    """Record round `it`'s line rollout and rollback; returns the node at the run repository's HEAD."""
    d = ctx.run.iteration(it)
    harness = read_model(d.harness_json, HarnessRef)
    results = read_model(d.results_json, RunResults)
    evaluated = harness.commit if harness is not None else ctx.repo.tag_commit(f"iter-{it - 1:03d}")
    node = tree.by_commit(evaluated) if evaluated else None
    if node is None:
        line = tree.rounds[-1].line if tree.rounds else None
        node = _branch(ctx, tree.add(evaluated or ctx.repo.head(), parent=line, kind="seed" if not tree.nodes else "child",
                                     iteration=it - 1))
    if results is not None:
        add_evidence(node, results, f"iterations/{it:03d}")
    head = ctx.repo.head()
    if head == node.commit:
        return node
    known = tree.by_commit(head)
    if known is not None:
        return known
    report = d.rollback()
    gone = [r.change_id for r in (report.rolled_back if report else []) if r.revert_commit]
    node.exhausted = True
    node.note = f"{', '.join(gone) or 'a change'} rolled back in iteration {it}; the tree goes on from the harness the rollback left"
    return _branch(ctx, tree.add(head, parent=node.id, kind="rollback", iteration=it, rolled_back=gone))


def _branch(ctx: "PhaseContext", node: Node) -> Node:
    """Every node has its branch node-NNN in the run's repository (a child's is fetched from its clone)."""
    ctx.repo.repo.git.branch("-f", node.branch, node.commit)
    return node

