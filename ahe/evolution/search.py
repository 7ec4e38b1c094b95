"""Search strategies (`search:` in the experiment, DESIGN.md §11.7, docs/search.md).

A strategy answers the loop's one search question in the evolve phase of iteration t: from
which harness do we evolve, and into how many children, and which child does the line
continue from. Everything around it — rollouts, attribution, re-evaluation, rollback,
manifests, gate, confinement, resume — stays the loop's own code under every strategy.

- `line` (the default, the paper): one evolve agent from the harness the rollback left.
- `best-of-n` (`variants: N`, docs/variants.md): N evolve agents from that harness, each
  child evaluated, the loop continues from the one `variant_select` picks.

Strategies are leaves: they are registered by `ahe.evolution.registry` and never import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ahe.harness.manifest import ChangeEntry, Manifest
from ahe.llm.types import Usage

if TYPE_CHECKING:
    from ahe.config import ExperimentConfig
    from ahe.evolution.context import PhaseContext


@dataclass
class Expansion:
    """What one evolve phase produced: the manifest the line continues with (its head is the
    run repository's HEAD), the evolve usage of every child, and the rollout usage of
    evaluating children inside the phase (None when the strategy evaluates none)."""

    manifest: Manifest
    usage: Usage
    child_rollouts: Usage | None = None


class SearchStrategy(Protocol):
    name: str

    def children(self, cfg: "ExperimentConfig") -> int:
        """How many evolve agents (children) one round runs."""
        ...

    async def expand(self, ctx: "PhaseContext", it: int, prior: tuple[ChangeEntry, ...]) -> Expansion:
        """Evolve from the run repository's HEAD and leave HEAD at the harness the line continues from."""
        ...


class LineSearch:
    """The paper's single line: one evolve agent, its harness is the next round's."""

    name = "line"

    def children(self, cfg: "ExperimentConfig") -> int:
        return 1

    async def expand(self, ctx: "PhaseContext", it: int, prior: tuple[ChangeEntry, ...]) -> Expansion:
        from ahe.evolution.context import evolve_limits
        from evolve_agent import run_evolve_phase
        from evolve_agent.phase import AgentSpec

        manifest = await run_evolve_phase(
            repo=ctx.repo, experiment_dir=ctx.run.root, iteration=it, out_dir=ctx.run.iteration(it).evolve,
            role=ctx.roles["evolve"], tasks_dir=ctx.tasks_dir, limits=evolve_limits(ctx), agent=AgentSpec(prior_changes=prior),
        )
        return Expansion(manifest=manifest, usage=Usage.model_validate(manifest.usage or {}))


class BestOfNSearch:
    """`variants: N` children from the same harness, each evaluated; the line continues from the best."""

    name = "best-of-n"

    def children(self, cfg: "ExperimentConfig") -> int:
        return cfg.variants

    async def expand(self, ctx: "PhaseContext", it: int, prior: tuple[ChangeEntry, ...]) -> Expansion:
        from ahe.evolution.variants import run_variants
        from ahe.harness.manifest import write_manifest
        from evolve_agent.summary import write_summary

        manifest, usage, rollouts = await run_variants(ctx, it, prior)
        out = ctx.run.iteration(it).evolve
        out.mkdir(parents=True, exist_ok=True)
        manifest.head_commit = ctx.repo.head()
        write_manifest(out / "manifest.json", manifest)
        write_summary(out / "summary.md", manifest)
        return Expansion(manifest=manifest, usage=usage, child_rollouts=rollouts)


LINE = LineSearch()
BEST_OF_N = BestOfNSearch()
