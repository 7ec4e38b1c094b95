"""The tree's archive (`tree.json` in the run folder): nodes, merges, rounds, the final choice.

A node is an evaluated harness: a commit of the run's repository (branch `node-NNN`), its parent,
the change ids it adds, the trials evaluated on it (pooled over every evaluation of that commit)
and its estimate of the true pass@1 — the Beta(1 + passed, 1 + failed) posterior's mean and sd.
A node whose commit nobody evaluated yet (the harness a rollback left) has n = 0: mean 0.5, the
prior's sd.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

from ahe.evolution.tree_choice import TreeNode
from ahe.harness.manifest import ChangeEntry
from ahe.run_folder import read_model, write_model

Kind = Literal["seed", "child", "merge", "rollback"]


class Node(BaseModel):
    id: str
    commit: str
    parent: str | None = None
    kind: Kind = "child"
    iteration: int = 0
    changes: list[str] = Field(default_factory=list, description="change ids this node adds over its parent")
    entries: list[ChangeEntry] = Field(default_factory=list, description="the manifest entries of `changes` (a merge: of both parts)")
    merged_from: list[str] = Field(default_factory=list)
    rolled_back: list[str] = Field(default_factory=list, description="change ids the loop's rollback reverted here")
    n_trials: int = 0
    n_passed: int = 0
    evaluations: list[str] = Field(default_factory=list, description="rollout folders, relative to the run folder")
    pruned: bool = False
    exhausted: bool = False
    stopped: str | None = Field(default=None, description="why a budget stopped this branch (ahe.evolution.tree_budget); None: not stopped")
    note: str = ""

    @property
    def branch(self) -> str:
        return self.id

    def estimate(self) -> tuple[float, float]:
        a, b = 1 + self.n_passed, 1 + self.n_trials - self.n_passed
        mean = a / (a + b)
        return mean, math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))

    def interval(self) -> tuple[float, float]:
        mean, sd = self.estimate()
        return max(0.0, mean - 1.96 * sd), min(1.0, mean + 1.96 * sd)

    def choice(self) -> TreeNode:
        mean, sd = self.estimate()
        return TreeNode(id=self.id, mean=mean, sd=sd, parent=self.parent, pruned=self.pruned, exhausted=self.exhausted,
                        stopped=self.stopped is not None)


class MergeRecord(BaseModel):
    iteration: int
    parts: list[str]
    node: str | None = None
    reason: str


class RoundRecord(BaseModel):
    iteration: int
    expansions: list[str] = Field(default_factory=list, description="parent node of each evolve call, in order")
    children: list[str | None] = Field(default_factory=list)
    pruned: list[str] = Field(default_factory=list)
    stopped: list[str] = Field(default_factory=list, description="branches the budget's rule stopped this round")
    budget: str | None = Field(default=None, description="the round's allocation under a budget, in words")
    merge_fits: bool = True  # under a budget: one more evaluation round (the merge's) still fits
    crossed: str | None = Field(default=None, description="a budget crossed inside the round: which, by how much, after what "
                                                          "(ahe.evolution.tree.crossing)")
    not_started: list[str] = Field(default_factory=list, description="what the round did not start after the crossing")
    line: str | None = None
    done: bool = False


class Tree(BaseModel):
    nodes: list[Node] = Field(default_factory=list)
    merges: list[MergeRecord] = Field(default_factory=list)
    rounds: list[RoundRecord] = Field(default_factory=list)
    finalists: list[str] = Field(default_factory=list)
    best: str | None = None
    best_reason: str = ""

    def node(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.id == node_id)

    def by_commit(self, commit: str) -> Node | None:
        return next((n for n in self.nodes if n.commit == commit), None)

    def add(self, commit: str, **kw) -> Node:
        node = Node(id=f"node-{len(self.nodes):03d}", commit=commit, **kw)
        self.nodes.append(node)
        return node

    def round(self, it: int) -> RoundRecord:
        rec = next((r for r in self.rounds if r.iteration == it), None)
        if rec is None:
            rec = RoundRecord(iteration=it)
            self.rounds.append(rec)
        return rec

    def path(self, node_id: str) -> list[str]:
        """The ids from the seed to `node_id` (first parents)."""
        out, cur = [], node_id
        while cur is not None:
            out.append(cur)
            cur = self.node(cur).parent
        return out[::-1]

    def entries_on(self, node_id: str) -> list[ChangeEntry]:
        """The manifest entries of every change a node holds, oldest node first."""
        held, out, seen = self.changes_on(node_id), [], set()
        for n in self.nodes:
            for e in n.entries:
                if e.id in held and e.id not in seen:
                    seen.add(e.id)
                    out.append(e)
        return out

    def changes_on(self, node_id: str) -> set[str]:
        """Every change id a node holds (its ancestors' and its merge parts', minus the rolled back)."""
        held: set[str] = set()
        gone: set[str] = set()
        todo, seen = [node_id], set()
        while todo:
            cur = self.node(todo.pop())
            if cur.id in seen:
                continue
            seen.add(cur.id)
            held |= set(cur.changes)
            gone |= set(cur.rolled_back)
            todo += [p for p in [cur.parent, *cur.merged_from] if p is not None]
        return held - gone


def tree_path(run) -> "object":
    return run.root / "tree.json"


def load_tree(run) -> Tree:
    return read_model(tree_path(run), Tree) or Tree()


def save_tree(run, tree: Tree) -> None:
    write_model(tree_path(run), tree)
