"""The five phases of one iteration (DESIGN.md §1), each a function with a typed result.

    rollout → attribution (t ≥ 2) → rollback (t ≥ 2) → debug → evolve

A phase reads and writes the run folder through `PhaseContext.run` and returns what the loop
needs for its bookkeeping (scores, history, events, budgets), usage included. The loop
(`ahe.evolution.loop`) calls them explicitly, one per step, and owns resume.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from ahe.errors import AheError
from ahe.evolution.attribution import attribute
from ahe.evolution.context import (BudgetSpent, PhaseContext, StopRequested, evolve_limits, reeval_executor,  # noqa: F401 (re-exported)
                                  rollout_config)
from ahe.evolution.rollback import apply_rollbacks
from ahe.harness.manifest import ChangeEntry, Manifest
from ahe.llm.types import Usage
from ahe.rollout.models import RunResults
from ahe.rollout.scheduler import run_rollouts
from ahe.run_folder import Attribution, HarnessRef, RollbackReport, write_model


class RolloutOutcome(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    tag: str  # the harness tag evaluated (iter-{t-1})
    commit: str
    results: RunResults


class EvolveOutcome(BaseModel):
    manifest: Manifest
    usage: Usage
    variant_rollouts: Usage | None = None  # best-of-N: the agent tokens of evaluating the variants


async def rollout_phase(ctx: PhaseContext, it: int) -> RolloutOutcome:
    """k trials per task of H_{t-1} (tag iter-{t-1}) into iterations/NNN/rollouts."""
    d = ctx.run.iteration(it)
    tag = f"iter-{it - 1:03d}"
    commit = ctx.repo.tag_commit(tag) or ctx.repo.head()
    write_model(d.harness_json, HarnessRef(iteration=it, evaluates=tag, commit=commit))
    cfg = rollout_config(ctx)
    progress = None
    if not ctx.console.quiet:
        from ahe.rollout.display import Progress
        from ahe.rollout.scheduler import loads_harness, plan_rollouts

        plan = plan_rollouts(cfg, d.root, check_load=loads_harness(ctx.executor))
        progress = Progress(len(plan.specs), cfg.concurrency, ctx.console, already_done=len(plan.done))
    with progress or contextlib.nullcontext():
        results = await run_rollouts(
            cfg, d.root, executor=ctx.executor, on_event=progress.on_event if progress else None,
            should_stop=ctx.should_stop,
        )
    if ctx.should_stop():
        raise StopRequested()
    # the scheduler's harness.json names the workspace; keep ours (the evaluated commit) with it
    write_model(d.harness_json, HarnessRef(iteration=it, evaluates=tag, commit=commit, workspace=str(ctx.run.workspace)))
    refuse_an_all_infra_round(ctx, it, results)
    return RolloutOutcome(tag=tag, commit=commit, results=results)


def refuse_an_all_infra_round(ctx: PhaseContext, it: int, results: RunResults) -> None:
    """A round whose every trial is an infrastructure error measured the machine, not the
    harness: judging it would charge every change with a regression and roll it back. Stop
    instead, the trials moved aside (kept to read), so that `--resume` runs the round again."""
    if not results.n_trials or results.infra_errors < results.n_trials:
        return
    d = ctx.run.iteration(it)
    first = next((t.error for t in d.trial_results() if t.error), None)
    aside = d.root / f"rollouts.infra-{time.strftime('%Y%m%dT%H%M%S')}"
    (d.root / "rollouts").rename(aside)
    d.results_json.unlink(missing_ok=True)
    raise AheError(
        f"iteration {it}: all {results.n_trials} trials ended in an infrastructure error "
        f"(first: {str(first or 'no message')[:300]}); nothing was judged or rolled back. Fix the cause "
        f"(`ahe doctor` checks the sandbox and the endpoints), then `ahe evolve --resume {ctx.run.root}` "
        f"runs this round again; the failed trials are kept in {aside}")


def _results(ctx: PhaseContext, it: int) -> RunResults:
    results = ctx.run.iteration(it).results()
    if results is None:
        raise RuntimeError(f"{ctx.run.iteration(it).results_json}: missing or unreadable; the rollout of iteration {it} did not finish")
    return results


def accepted_changes(ctx: PhaseContext, it: int) -> list[ChangeEntry]:
    """The changes of iteration `it` that passed the gate (none when it made no manifest)."""
    manifest, partial = ctx.run.iteration(it).manifest()
    return [] if manifest is None or partial else manifest.accepted()


async def attribution_phase(ctx: PhaseContext, it: int) -> Attribution:
    """Judge the changes of iteration t-1 by what flipped between t-1 and t (or, for a policy
    that judges whole rounds, by its own evidence and re-evaluation trials)."""
    from ahe.evolution.registry import get_policy

    policy: Any = get_policy(ctx.cfg.attribution.strictness)
    if hasattr(policy, "judge_round"):
        att = await policy.judge_round(ctx, it)
        if ctx.should_stop():
            raise StopRequested()
        if att.reeval is not None:
            write_model(ctx.run.iteration(it).reeval_json, att.reeval)
        write_model(ctx.run.iteration(it).attribution_json, att)
        return att
    att = attribute(
        accepted_changes(ctx, it - 1),
        _results(ctx, it - 1),
        _results(ctx, it),
        iteration=it,
        delta=ctx.cfg.attribution.delta,
        strictness=ctx.cfg.attribution.strictness,
        metric=ctx.cfg.metric,
    )
    write_model(ctx.run.iteration(it).attribution_json, att)
    return att


def rollback_phase(ctx: PhaseContext, it: int) -> RollbackReport:
    """Revert, by git, every change the attribution of iteration t judged `rollback`."""
    att = ctx.run.iteration(it).attribution()
    if att is None:
        raise RuntimeError(f"{ctx.run.iteration(it).attribution_json}: missing or unreadable")
    report = apply_rollbacks(ctx.repo, att)
    write_model(ctx.run.iteration(it).rollback_json, report)
    return report


async def debug_phase(ctx: PhaseContext, it: int) -> Usage | None:
    """Corpus, facts, per-task reports and the overview of iteration t; the debugger's usage."""
    if not ctx.cfg.debugger.enabled:
        return None
    from debugger import run_debug_phase

    summary = await run_debug_phase(
        ctx.run.iteration(it).root,
        previous_dir=ctx.run.iteration(it - 1).root if it > 1 else None,
        role=ctx.roles["debugger"],
        concurrency=ctx.cfg.debugger.concurrency,
        use_agent=ctx.cfg.debugger.use_agent,
    )
    u = summary.usage or {}
    return Usage(
        prompt_tokens=int(u.get("prompt_tokens", 0)),
        completion_tokens=int(u.get("completion_tokens", 0)),
        cached_tokens=int(u.get("cached_tokens", 0)),
        reasoning_tokens=int(u.get("reasoning_tokens", 0)),
        cost_usd=u.get("cost_usd"),
    )


async def explore_phase(ctx: PhaseContext, it: int) -> EvolveOutcome | None:
    """Iteration 1 with `explore.sources`: the explore agent seeds skills (docs/explore.md)."""
    e = ctx.cfg.explore
    if it != 1 or not e.sources:
        return None
    from explore_agent import ExploreLimits, run_explore_phase

    manifest = await run_explore_phase(
        repo=ctx.repo, sources=e.sources, out_dir=ctx.run.iteration(it).explore, role=ctx.roles["explore"],
        tasks_dir=ctx.tasks_dir, iteration=it,
        limits=ExploreLimits(max_turns=e.max_turns, wall_clock_sec=e.wall_clock_sec, max_source_mb=e.max_source_mb),
    )
    ctx.repo.discard_uncommitted()
    return EvolveOutcome(manifest=manifest, usage=Usage.model_validate(manifest.usage or {}))


def explored_changes(ctx: PhaseContext, it: int) -> tuple[ChangeEntry, ...]:
    """The explore agent's accepted skills of this iteration: they open its evolve manifest."""
    m = ctx.run.iteration(it).explore_manifest()
    return tuple(m.accepted()) if m is not None else ()


async def evolve_phase(ctx: PhaseContext, it: int) -> EvolveOutcome:
    """The evolve agent edits the harness (each change validated and committed); tag iter-t.

    How many evolve agents run and which child the line continues from is the `search:` strategy's
    (`ahe.evolution.search`: `line`, or `best-of-n` with `variants: N`); the rollouts of evaluating
    children inside the phase are returned as `variant_rollouts` so the budgets count them.
    """
    if ctx.evolve is not None:  # a scripted evolve phase (ahe simulate)
        manifest = await ctx.evolve(repo=ctx.repo, iteration=it, out_dir=ctx.run.iteration(it).evolve, tasks_dir=ctx.tasks_dir)
        ctx.repo.discard_uncommitted()
        ctx.repo.tag(f"iter-{it:03d}")
        return EvolveOutcome(manifest=manifest, usage=Usage.model_validate(manifest.usage or {}))
    from ahe.evolution.registry import get_search

    done = await get_search(ctx.cfg.search).expand(ctx, it, explored_changes(ctx, it))
    manifest, usage, variant_rollouts = done.manifest, done.usage, done.child_rollouts
    ctx.repo.discard_uncommitted()
    ctx.repo.tag(f"iter-{it:03d}")
    return EvolveOutcome(manifest=manifest, usage=usage, variant_rollouts=variant_rollouts)
