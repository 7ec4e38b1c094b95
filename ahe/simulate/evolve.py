"""A scripted evolve phase: the world's changes of this iteration, committed like real ones.

Each change is one marker file `sim/<uid>.md` (a short note, no hint of its true effect),
committed alone as exactly the edit its manifest entry lists, with the predictions the world
drew for it (precision and recall as the scenario says), then checked by the real validation
gate (`evolve_agent.gate.run_gate`: files match the commit, protected parts intact, the
workspace loads, leakage lint). The smoke session is skipped: a marker file registers no
component, and starting a mock model per change would cost more than the whole iteration.
The manifest is written where the evolve agent's is, so attribution, audit and report read it.
"""

from __future__ import annotations

from pathlib import Path

from ahe.harness.repo import HarnessRepo
from ahe.simulate.world import World
from ahe.harness.manifest import ChangeEntry, Manifest, write_manifest
from evolve_agent.summary import write_summary


class ScriptedEvolve:
    """`gate=False` records the changes as accepted without the gate: a marker file always passes
    it, and its workspace-load probe (a jailed subprocess, ~0.35 s a change) was most of a
    simulated run's time. The decisions under test are unaffected."""

    def __init__(self, world: World, *, gate: bool = True) -> None:
        self.world = world
        self.gate = gate

    async def __call__(self, *, repo: HarnessRepo, iteration: int, out_dir: Path, tasks_dir: Path | None) -> Manifest:
        from evolve_agent.context import discard_all

        out_dir.mkdir(parents=True, exist_ok=True)
        # what the evolve agent does first, when there is anything to throw away (one git process when
        # there is not, as in every simulated round, instead of the seven of discard_all's checks)
        if repo.repo.git.status("--porcelain", "--untracked-files=all", "--ignored"):
            discard_all(repo)
        base = repo.head()
        manifest = Manifest(iteration=iteration, base_commit=base, stop_reason="scripted")
        todo = self.todo(repo, iteration)
        for n, c in enumerate(todo, start=1):
            path = repo.path / c.marker
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# Simulated change {c.uid}\n\nA scripted edit of iteration {iteration}.\n", encoding="utf-8")
            entry = ChangeEntry(
                id=f"chg-{n}",
                component="skill",
                files=[c.marker],
                summary=f"simulated change {c.uid}",
                root_cause="scripted by the decision simulator",
                targeted_fix="scripted by the decision simulator",
                predicted_fixes=c.predicted_fixes,
                predicted_regressions=c.predicted_regressions,
            )
            entry.commit = repo.commit_paths([c.marker], f"{entry.id}: {entry.summary}")
            manifest.changes.append(entry)
        if self.gate:
            await _gate(repo, manifest, base, tasks_dir)
        else:
            for entry in manifest.changes:
                entry.status = "accepted"
        manifest.head_commit = repo.head()
        write_manifest(out_dir / "manifest.json", manifest)
        write_summary(out_dir / "summary.md", manifest)
        return manifest

    def todo(self, repo: HarnessRepo, iteration: int) -> list:
        """The changes to commit: the world's stream of this iteration, whatever the harness holds."""
        return sorted((c for c in self.world.changes.values() if c.iteration == iteration), key=lambda c: c.index)


async def _gate(repo: HarnessRepo, manifest: Manifest, base: str, tasks_dir: Path | None) -> None:
    """The real gate without its smoke session (see the module docstring)."""
    from evolve_agent.gate import run_gate

    await run_gate(repo, manifest, base_commit=base, tasks_dir=tasks_dir, smoke=False)
