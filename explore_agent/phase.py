"""One explore phase: snapshot the sources, run the explore agent, validate its skills.

It is the evolve phase with another agent: `evolve_agent.run_evolve_phase` with the explore
workspace, its own first message, `record_change` limited to the `skill` class and evidence
citing source files. The sources snapshot is the jail's `/experiment`. The manifest it writes
(`<out>/manifest.json`) marks every change `origin: explore`; the loop then starts iteration
1's evolve manifest with the accepted ones, so they are attributed — and rolled back when
they do not hold — like any other change.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ahe.harness.manifest import Manifest, write_manifest
from ahe.harness.repo import HarnessRepo
from ahe.llm.types import RoleConfig
from explore_agent.sources import snapshot_sources

WORKSPACE = Path(__file__).resolve().parent / "workspace"


class ExploreLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_turns: int = Field(default=40, ge=1)
    wall_clock_sec: float = Field(default=1800, gt=0)
    max_source_mb: float = Field(default=20, gt=0)


def build_instruction(names: list[str], notes: list[str], tasks: set[str], limits: ExploreLimits) -> str:
    lines = ["Explore. Seed the harness in /workspace with a few reusable skills drawn from these sources "
             "(read-only, under /experiment):"]
    lines += [f"- /experiment/{n}/" for n in names] or ["- (no source could be read)"]
    if notes:
        lines += ["", "Notes on the sources:"] + [f"- {n}" for n in notes]
    if tasks:
        shown = sorted(tasks)
        lines += ["", f"The tasks the harness will be evolved on (for predictions only): {', '.join(shown[:80])}"
                      + (f" (and {len(shown) - 80} more)" if len(shown) > 80 else "") + "."]
    lines += ["", f"Budget: {limits.max_turns} turns. Record each skill with record_change (component skill), then call finish."]
    return "\n".join(lines)


async def run_explore_phase(*, repo: HarnessRepo, sources: list[str], out_dir: Path, role: RoleConfig,
                            tasks_dir: Path | None, limits: ExploreLimits | None = None, iteration: int = 1) -> Manifest:
    """Run the explore agent on `repo`; returns its manifest (changes marked origin=explore)."""
    from evolve_agent.context import EvolveLimits
    from evolve_agent.phase import AgentSpec, known_tasks, run_evolve_phase

    limits = limits or ExploreLimits()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    snap = snapshot_sources(sources, out_dir / "sources", max_total_mb=limits.max_source_mb)
    tasks = known_tasks(None, iteration, tasks_dir)
    agent = AgentSpec(workspace=WORKSPACE, instruction=build_instruction(snap.names, snap.notes, tasks, limits),
                      allowed_components=frozenset({"skill"}), evidence_sources=frozenset(snap.names),
                      allowed_paths=("skills/", "agent.yaml"), registry_keys=frozenset({"skills"}))
    manifest = await run_evolve_phase(
        repo=repo, experiment_dir=snap.root, iteration=iteration, out_dir=out_dir, role=role, tasks_dir=tasks_dir,
        limits=EvolveLimits(max_turns=limits.max_turns, wall_clock_sec=limits.wall_clock_sec), agent=agent,
    )
    for c in manifest.changes:
        c.origin = "explore"
    manifest.gate_notes += [f"sources: {n}" for n in snap.notes]
    write_manifest(out_dir / "manifest.json", manifest)
    return manifest
