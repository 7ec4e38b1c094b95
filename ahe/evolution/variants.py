"""Best-of-N per round (docs/variants.md): N evolve agents from the same evidence, each evaluated.

With `variants: N` (N ≥ 2) the evolve phase of iteration t runs N evolve agents in parallel,
each in its own clone of the harness repository (`iterations/NNN/variants/vK/workspace/`,
branch `variant/iter-NNN/vK` from the same base commit), with its own manifest (`vK/evolve/`).
Each variant's harness is then evaluated on the tasks (k trials, `vK/rollouts/`), and the
loop continues from the one the rule `variant_select` picks:

- `pass_at_1`: the highest pass@1; ties go to fewer tokens per trial, then the lower number;
- `successes_per_mtok`: the most successes per million tokens; ties to the higher pass@1.

The chosen variant's commits are fetched into the run's repository and become H_t; its
manifest becomes the iteration's manifest (so attribution judges its changes in iteration
t+1, on a fresh evaluation, not on the selection's own). Every variant's commits are fetched
as the branch `variant/iter-NNN/vK`, and `variants.json` records them all for the audit.
Tokens of every variant (evolve sessions and evaluation) count against the budgets.

Resume: a variant whose manifest is final is not evolved again (its clone holds its
commits); its evaluation is an ordinary rollout folder, so finished trials are never re-run.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ahe.harness.manifest import ChangeEntry, Manifest
from ahe.harness.repo import HarnessRepo
from ahe.llm.types import Usage
from ahe.rollout.models import RunResults
from ahe.run_folder import VariantRecord, VariantsReport, read_model, write_model

if TYPE_CHECKING:
    from ahe.evolution.context import PhaseContext

Rule = Literal["pass_at_1", "successes_per_mtok"]


def branch_name(it: int, n: int) -> str:
    return f"variant/iter-{it:03d}/v{n}"


def _metrics(results: RunResults) -> tuple[float | None, float | None]:
    """(tokens per trial, successes per Mtok) over the trials that were not infra-aborted."""
    ran = results.n_trials - results.infra_errors
    tokens = results.usage.total_tokens
    return (tokens / ran if ran else None), (results.n_passed * 1e6 / tokens if tokens else None)


def choose(records: list[VariantRecord], rule: Rule) -> tuple[int | None, str]:
    """The variant the rule picks, and why (one sentence)."""
    scored = [r for r in records if r.pass_at_1 is not None]
    if not scored:
        return None, "no variant was evaluated"
    if rule == "successes_per_mtok":
        best = max(scored, key=lambda r: (r.successes_per_mtok or 0.0, r.pass_at_1 or 0.0, -r.n))
        return best.n, f"most successes per million tokens ({(best.successes_per_mtok or 0):.1f}), pass@1 {best.pass_at_1:.3f}"
    best = max(scored, key=lambda r: (r.pass_at_1 or 0.0, -(r.tokens_per_trial or float("inf")), -r.n))
    return best.n, f"highest pass@1 ({best.pass_at_1:.3f}; ties: fewer tokens per trial, then the lower number)"


async def _one(ctx: "PhaseContext", it: int, n: int, base: str, prior: tuple[ChangeEntry, ...]) -> tuple[VariantRecord, Manifest, RunResults]:
    from ahe.evolution.context import evolve_limits, rollout_config
    from ahe.rollout.scheduler import run_rollouts
    from evolve_agent.phase import AgentSpec, build_instruction, known_tasks, run_evolve_phase

    d = ctx.run.iteration(it).variant(n)
    ws, out = d / "workspace", d / "evolve"
    manifest = read_model(out / "manifest.json", Manifest)
    if manifest is not None and manifest.base_commit == base and manifest.head_commit and (ws / ".git").is_dir():
        vrepo = HarnessRepo(ws)
        vrepo.repo.git.reset("--hard", "-q", manifest.head_commit)  # a finished variant: never evolved again
    else:
        for stale in (out, d / "rollouts"):
            shutil.rmtree(stale, ignore_errors=True)
        vrepo = ctx.repo.clone_at(ws, base)
        limits = evolve_limits(ctx)
        tasks = known_tasks(ctx.run.root, it, ctx.tasks_dir)
        note = (f"\n\nYou are variant {n} of {ctx.cfg.variants}: other evolve agents work on the same evidence in "
                "parallel, and the best harness by evaluation is kept. Pursue your own best reading of the evidence.")
        spec = AgentSpec(instruction=build_instruction(ctx.run.root, it, base, tasks, limits, vrepo.path) + note, prior_changes=prior)
        manifest = await run_evolve_phase(repo=vrepo, experiment_dir=ctx.run.root, iteration=it, out_dir=out,
                                          role=ctx.roles["evolve"], tasks_dir=ctx.tasks_dir, limits=limits, agent=spec)
        vrepo.discard_uncommitted()
    cfg = rollout_config(ctx).model_copy(update={"workspace": ws})
    results = await run_rollouts(cfg, d, should_stop=ctx.should_stop)
    from ahe.evolution.faults import maybe_kill_self

    maybe_kill_self(f"{it:03d}/variant-{n}-evaluated")  # fault injection for the resume test
    tpt, spm = _metrics(results)
    rec = VariantRecord(
        n=n, branch=branch_name(it, n), head_commit=vrepo.head(),
        accepted=[c.id for c in manifest.changes if c.status == "accepted" and c not in prior],
        rejected=[c.id for c in manifest.rejected()], pass_at_1=results.pass_at_1 if results.n_trials else None,
        n_trials=results.n_trials, tokens_per_trial=tpt, successes_per_mtok=spm,
        evolve_tokens=Usage.model_validate(manifest.usage or {}).total_tokens, rollout_tokens=results.usage.total_tokens,
        infra_error=manifest.infra_error,
    )
    return rec, manifest, results


async def run_variants(ctx: "PhaseContext", it: int, prior: tuple[ChangeEntry, ...]) -> tuple[Manifest, Usage, Usage]:
    """Evolve N variants, evaluate them, move the run's repository to the chosen one.

    Returns (the chosen manifest, the evolve usage of all variants, the rollout usage of all).
    """
    from ahe.evolution.context import StopRequested

    base = ctx.repo.head()
    folder = ctx.run.iteration(it)
    outs = await asyncio.gather(*(_one(ctx, it, n, base, prior) for n in range(1, ctx.cfg.variants + 1)))
    if ctx.should_stop():
        raise StopRequested()
    records = [r for r, _, _ in outs]
    for rec in records:  # every variant's commits, as a branch of the run's repository
        ws = folder.variant(rec.n) / "workspace"
        ctx.repo.repo.git.fetch("-q", str(ws), f"+main:refs/heads/{rec.branch}")
    chosen, reason = choose(records, ctx.cfg.variant_select)  # type: ignore[arg-type]
    report = VariantsReport(iteration=it, base_commit=base, rule=ctx.cfg.variant_select, chosen=chosen, reason=reason,
                            variants=records)
    if chosen is None:
        manifest = Manifest(iteration=it, base_commit=base, changes=list(prior), head_commit=base,
                            infra_error="no variant could be evaluated; the harness stays at the base")
    else:
        report.variants[chosen - 1].chosen = True
        manifest = outs[chosen - 1][1]
        ctx.repo.repo.git.reset("--hard", "-q", records[chosen - 1].head_commit)
    manifest.gate_notes.append(f"best of {len(records)} variants by {ctx.cfg.variant_select}: variant {chosen} — {reason} "
                               f"(iterations/{it:03d}/variants/variants.json)")
    write_model(folder.variants_json, report)
    evolve = Usage()
    rollouts = Usage()
    for _, m, res in outs:
        evolve = evolve.add(Usage.model_validate(m.usage or {}))
        rollouts = rollouts.add(res.usage)
    return manifest, evolve, rollouts
