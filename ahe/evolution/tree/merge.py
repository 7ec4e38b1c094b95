"""Merge by component: two branches each holding a kept change the other lacks, on different
files, merged by git into a child judged like any change (its entries: the union of the parts').

A pair is tried once; a round resumed after its merge keeps the merge's clone and trials. Overlapping files are not merged (the record names the file); neither is a
pair git cannot merge cleanly (the record quotes git). One merge per round at most.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import git

from ahe.evolution.tree.archive import MergeRecord, Node, Tree
from ahe.evolution.faults import maybe_kill_self
from ahe.evolution.tree.children import Made, adopt, evaluate
from ahe.harness.repo import HarnessRepo
from ahe.llm.types import Usage
from ahe.rollout.models import RunResults
from ahe.run_folder import read_model

if TYPE_CHECKING:
    from ahe.evolution.context import PhaseContext


def _files(tree: Tree, node: Node, other: Node) -> tuple[list, set[str]]:
    """The entries `node` holds and `other` lacks, and the files they touch."""
    lacks = tree.changes_on(node.id) - tree.changes_on(other.id)
    entries = [e for e in tree.entries_on(node.id) if e.id in lacks]
    return entries, {f for e in entries for f in e.files}


def candidates(tree: Tree) -> list[tuple[Node, Node]]:
    """Pairs (base, other) of unpruned nodes not tried before, each side holding a change the other lacks, best pair first."""
    tried = {frozenset(m.parts) for m in tree.merges}
    nodes = [n for n in tree.nodes if n.n_trials > 0 and n.kind != "rollback" and not n.pruned]  # a pruned node is never expanded
    pairs = []
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            if frozenset((a.id, b.id)) in tried:
                continue
            if _files(tree, a, b)[0] and _files(tree, b, a)[0]:
                base, other = (a, b) if a.estimate()[0] >= b.estimate()[0] else (b, a)
                pairs.append((base, other))
    return sorted(pairs, key=lambda p: (-(p[0].estimate()[0] + p[1].estimate()[0]), p[0].id, p[1].id))


async def try_merge(ctx: "PhaseContext", tree: Tree, it: int) -> Made | None:
    """At most one merge this round: None when no pair is left; a conflict is recorded, not merged."""
    from ahe.evolution.tree.sync import add_evidence

    done = next((m for m in tree.merges if m.iteration == it), None)
    if done is not None:  # a resumed round: the merge's trials are counted again, never run again
        results = read_model(ctx.run.iteration(it).tree / "merge" / "results.json", RunResults) if done.node else None
        return Made(node=tree.node(done.node) if done.node else None, rollouts=results.usage if results else Usage())
    pairs = candidates(tree)
    if not pairs:
        return None
    base, other = pairs[0]
    mine, my_files = _files(tree, base, other)
    theirs, their_files = _files(tree, other, base)
    parts = [base.id, other.id]
    both = sorted(my_files & their_files)
    if both:
        tree.merges.append(MergeRecord(iteration=it, parts=parts, reason=f"not merged: both sides change {', '.join(both)} "
                                       f"({', '.join(e.id for e in mine)} vs {', '.join(e.id for e in theirs)})"))
        return Made(node=None)
    d = ctx.run.iteration(it).tree / "merge"
    ws = d / "workspace"
    repo = _made_before(ws, base, other)
    if repo is None:  # not merged yet: a fresh clone, and no results of another commit left behind
        shutil.rmtree(d, ignore_errors=True)
        repo = ctx.repo.clone_at(ws, base.commit)
        try:
            repo.repo.git.merge("-q", "--no-edit", "-m", f"merge {other.id} into {base.id}", other.commit)
        except git.GitCommandError as e:
            repo.repo.git.merge("--abort")
            first = (e.stdout or e.stderr or str(e)).strip().splitlines()
            tree.merges.append(MergeRecord(iteration=it, parts=parts, reason=f"not merged: git could not merge ({first[0] if first else 'conflict'})"))
            return Made(node=None)
    results = await evaluate(ctx, ws, d)
    maybe_kill_self(f"{it:03d}/tree-merge-evaluated")  # fault injection for the resume test
    node = adopt(ctx, tree, ws, repo.head(), parent=base.id, kind="merge", iteration=it, merged_from=[other.id],
                 changes=[e.id for e in theirs], entries=theirs + mine)
    add_evidence(node, results, str(d.relative_to(ctx.run.root)))
    tree.merges.append(MergeRecord(iteration=it, parts=parts, node=node.id,
                                   reason=f"merged {', '.join(e.id for e in theirs)} of {other.id} into {base.id} "
                                          f"(different files: {', '.join(sorted(their_files))} vs {', '.join(sorted(my_files))})"))
    return Made(node=node, rollouts=results.usage)


def _made_before(ws: Path, base: Node, other: Node) -> HarnessRepo | None:
    """A resumed round: the clone whose HEAD already merges `other` into `base` (its trials are kept)."""
    if not (ws / ".git").is_dir():
        return None
    repo = HarnessRepo(ws)
    try:
        parents = [p.hexsha for p in repo.repo.head.commit.parents]
    except ValueError:  # a clone killed before its checkout
        return None
    if parents != [base.commit, other.commit]:
        return None
    repo.discard_uncommitted()
    return repo
