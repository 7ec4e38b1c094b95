"""The scripted evolve phase of a tree world in the real loop: proposals from the harness at HEAD.

Like `ahe.simulate.evolve.ScriptedEvolve`, but the changes come from `TreeWorld.propose` on the
markers the harness holds, the `nth` time the loop evolves from that very harness (a line that
rolled everything back starts again from the same harness and gets its next proposal, as an
agent that reads the history would) — the same function the tree strategy draws from.
"""

from __future__ import annotations

from ahe.harness.repo import HarnessRepo
from ahe.simulate.evolve import ScriptedEvolve
from ahe.simulate.search.tree_world import TreeWorld
from ahe.simulate.world import markers_in


class ParentAwareEvolve(ScriptedEvolve):
    def __init__(self, world: TreeWorld, *, gate: bool = False) -> None:
        super().__init__(world, gate=gate)  # type: ignore[arg-type]  (a TreeWorld has the fields it reads)
        self.seen: dict[frozenset[str], int] = {}

    def todo(self, repo: HarnessRepo, iteration: int) -> list:
        markers = frozenset(markers_in(repo.path))
        nth = self.seen.get(markers, 0)
        self.seen[markers] = nth + 1
        return self.world.propose(markers, nth)  # type: ignore[attr-defined]
