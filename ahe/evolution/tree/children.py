"""One evolve call of the tree and the evaluation of what it made, in its own clone.

`iterations/NNN/tree/cI/`: `workspace/` (a clone of the run's repository at the parent node's
commit), `evolve/` (the call's manifest), `rollouts/`-style results in the folder itself (an
ordinary rollout folder: a resumed run re-runs only trials without a result). A merge is
evaluated the same way in `iterations/NNN/tree/merge/`.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING


from ahe.evolution.tree.archive import Node, Tree
from ahe.harness.manifest import ChangeEntry, Manifest
from ahe.harness.repo import HarnessRepo
from ahe.llm.types import Usage
from ahe.rollout.models import RunResults
from ahe.run_folder import read_model

if TYPE_CHECKING:
    from ahe.evolution.context import PhaseContext


@dataclass
class Made:
    """What one evolve call (or merge) made: its evaluated node (None: nothing new) and its usage."""

    node: Node | None
    evolve: Usage = field(default_factory=Usage)
    rollouts: Usage = field(default_factory=Usage)


def digest(tree: Tree, parent: Node, limit: int = 8) -> str:
    """What was tried on other branches and rejected (rolled back, pruned, or no better), cited by node;
    changes the parent itself holds are not listed."""
    mine, held = set(tree.path(parent.id)), tree.changes_on(parent.id)
    lines = []
    for n in tree.nodes:
        if n.id in mine or not n.entries:
            continue
        mean, _ = n.estimate()
        why = ("rolled back" if any(c in m.rolled_back for m in tree.nodes for c in n.changes)
               else "pruned" if n.pruned else f"estimate {mean:.2f}")
        for e in [e for e in n.entries if e.id not in held][:2]:  # not what the parent holds (a merge's other part)
            lines.append(f"- {n.id} ({n.commit[:10]}): {e.id} [{e.component}] {e.summary} — {why}")
    return "\n".join(lines[:limit])


async def evaluate(ctx: "PhaseContext", ws: Path, out: Path, limit: asyncio.Semaphore | None = None) -> RunResults:
    """The harness in clone `ws` on the run's tasks, results in `out`; under `executor: ray` on the
    run's shared executor (children evaluated side by side share its cluster), else locally under
    `limit` (the round's one bound on trials at once, shared by its children) or `concurrency`."""
    from ahe.evolution.context import rollout_config
    from ahe.rollout.scheduler import run_rollouts

    cfg = rollout_config(ctx).model_copy(update={"workspace": ws})
    return await run_rollouts(cfg, out, executor=ctx.executor, should_stop=ctx.should_stop, limit=limit)


def adopt(ctx: "PhaseContext", tree: Tree, ws: Path, head: str, **kw) -> Node:
    """The node for `head` (fetched from the clone `ws` as branch node-NNN), new or known."""
    known = tree.by_commit(head)
    if known is not None:
        return known
    node = tree.add(head, **kw)
    ctx.repo.repo.git.fetch("-q", str(ws), f"+{head}:refs/heads/{node.branch}")
    return node


@dataclass
class Proposal:
    """One evolve call's outcome in its clone: the accepted changes (none: nothing new)."""

    i: int
    parent: Node
    folder: Path
    repo: HarnessRepo
    accepted: list[ChangeEntry]
    usage: Usage


async def propose(ctx: "PhaseContext", tree: Tree, it: int, i: int, parent: Node, width: int, node_no: int) -> Proposal:
    """Evolve from `parent` (with its evidence and the digest of other branches) in clone c{i}; a
    finished call is never evolved again. A call that proposed nothing marks the parent exhausted.
    `node_no` is the number its child will have (children are adopted later, in call order), so
    the call names its changes n{node_no}-chg-M, commit messages too."""
    from ahe.evolution.context import evolve_limits
    from evolve_agent.phase import AgentSpec, build_instruction, known_tasks, run_evolve_phase

    d = ctx.run.iteration(it).tree_child(i)
    ws, out = d / "workspace", d / "evolve"
    manifest = read_model(out / "manifest.json", Manifest)
    if manifest is not None and manifest.base_commit == parent.commit and manifest.head_commit and (ws / ".git").is_dir():
        crepo = HarnessRepo(ws)
        crepo.repo.git.reset("--hard", "-q", manifest.head_commit)  # a finished call: never evolved again
    else:
        shutil.rmtree(d, ignore_errors=True)
        crepo = ctx.repo.clone_at(ws, parent.commit)
        limits = evolve_limits(ctx)
        tasks = known_tasks(ctx.run.root, it, ctx.tasks_dir)
        evidence = parent.evaluations[-1] if parent.evaluations else "none yet (not evaluated)"
        note = (f"\n\nSearch tree: you are tree child {i} of {width}, expanding {parent.id} (commit {parent.commit[:10]}); "
                f"its latest evaluation: /experiment/{evidence}.")
        tried = digest(tree, parent)
        if tried:
            note += "\nTried on other branches (do not repeat these):\n" + tried
        spec = AgentSpec(instruction=build_instruction(ctx.run.root, it, parent.commit, tasks, limits, crepo.path) + note,
                         id_prefix=f"n{node_no:03d}-")
        manifest = await run_evolve_phase(repo=crepo, experiment_dir=ctx.run.root, iteration=it, out_dir=out,
                                          role=ctx.roles["evolve"], tasks_dir=ctx.tasks_dir, limits=limits, agent=spec)
        crepo.discard_uncommitted()
    accepted = [c for c in manifest.changes if c.status == "accepted"]
    if crepo.head() == parent.commit or not accepted:
        parent.exhausted = True
        parent.note = f"its evolve call in iteration {it} proposed nothing new"
        accepted = []
    return Proposal(i=i, parent=parent, folder=d, repo=crepo, accepted=accepted, usage=Usage.model_validate(manifest.usage or {}))


async def evaluate_proposal(ctx: "PhaseContext", it: int, p: Proposal, limit: asyncio.Semaphore | None = None) -> RunResults | None:
    """The child's evaluation round in its own folder (a resumed run re-runs only trials without a result)."""
    from ahe.evolution.faults import maybe_kill_self

    if not p.accepted:
        return None
    results = await evaluate(ctx, p.repo.path, p.folder, limit)
    maybe_kill_self(f"{it:03d}/tree-child-{p.i}-evaluated")  # fault injection for the resume test
    return results


def adopt_child(ctx: "PhaseContext", tree: Tree, it: int, p: Proposal, results: RunResults | None) -> Made:
    """The evaluated child as a node of the tree (ids in the order of the calls, not of their ends)."""
    from ahe.evolution.tree.sync import add_evidence

    if results is None:
        return Made(node=None, evolve=p.usage)
    entries = [_renamed(c, len(tree.nodes)) for c in p.accepted]
    node = adopt(ctx, tree, p.repo.path, p.repo.head(), parent=p.parent.id, kind="child", iteration=it,
                 changes=[e.id for e in entries], entries=entries)
    add_evidence(node, results, str(p.folder.relative_to(ctx.run.root)))
    return Made(node=node, evolve=p.usage, rollouts=results.usage)


def recorded(ctx: "PhaseContext", tree: Tree, it: int, i: int, child: str | None) -> Made:
    """A child a resumed round made before the kill: its node and the usage it spent (read back from
    its folder, so the round's tokens — and the budgets — count it once, as if never killed)."""
    d = ctx.run.iteration(it).tree_child(i)
    manifest = read_model(d / "evolve" / "manifest.json", Manifest)
    results = read_model(d / "results.json", RunResults) if child else None
    return Made(node=tree.node(child) if child else None, evolve=Usage.model_validate(manifest.usage or {}) if manifest else Usage(),
                rollouts=results.usage if results else Usage())


def _renamed(c: ChangeEntry, n: int) -> ChangeEntry:
    """Change ids unique across the tree: node-NNN's chg-1 is n{NNN}-chg-1 (the evolve call already
    numbers them so, commit messages too; this renames a manifest from before that, or one whose
    call foresaw another node number)."""
    bare = re.sub(r"^n\d{3}-", "", c.id)
    return c if c.id == f"n{n:03d}-{bare}" else c.model_copy(update={"id": f"n{n:03d}-{bare}"})
