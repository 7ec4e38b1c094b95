"""The final phase: the returned `best` and the seed scored once on the sealed held-out split
(ahe.evolution.holdout). Runs after every decision is made; nothing it measures reaches one."""

from __future__ import annotations

from ahe.evolution.context import PhaseContext, StopRequested
from ahe.evolution.holdout import HarnessScore, HoldoutResult, Split, extract, holdout_dir, paired_ci
from ahe.rollout.scheduler import RolloutConfig, run_rollouts
from ahe.run_folder import Scores


def load_result(ctx_run) -> HoldoutResult | None:
    path = holdout_dir(ctx_run) / "result.json"
    try:
        return HoldoutResult.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


async def _score(ctx: PhaseContext, split: Split, label: str, commit: str, iteration: int | None, k: int) -> HarnessScore:
    root = holdout_dir(ctx.run) / label
    workspace = extract(ctx.repo.path, commit, root / "harness")
    cfg = RolloutConfig(**{**ctx.cfg.rollout_settings(), "include": list(split.held_out), "k": k},
                        tasks_dir=split.tasks_dir, workspace=workspace, agent_role=ctx.roles["agent"], seal_dir=ctx.run.sealed)
    results = await run_rollouts(cfg, root, executor=ctx.executor, should_stop=ctx.should_stop)
    if ctx.should_stop():
        raise StopRequested()
    return HarnessScore(label=label, commit=commit, iteration=iteration, pass_at_1=results.pass_at_1,
                        n_trials=results.n_trials, n_passed=results.n_passed, infra_errors=results.infra_errors,
                        per_task={t: s.pass_rate for t, s in results.tasks.items()})


async def score_holdout(ctx: PhaseContext, split: Split, scores: Scores) -> HoldoutResult | None:
    """Score seed and best on the held-out tasks; a finished result is read back, never re-run."""
    done = load_result(ctx.run)
    if done is not None:
        return done
    seed_commit = ctx.repo.tag_commit("iter-000")
    best_commit = scores.best_commit or ctx.repo.tag_commit("best")
    if seed_commit is None or best_commit is None:
        return None
    k = (ctx.cfg.holdout.k if ctx.cfg.holdout else None) or ctx.cfg.k
    ctx.console.print(f"[bold]held-out split[/] — {len(split.held_out)} sealed task(s), k={k}: the seed and best")
    seed = await _score(ctx, split, "seed", seed_commit, 0, k)
    best = await _score(ctx, split, "best", best_commit, scores.best_iteration, k)
    common = sorted(set(seed.per_task) & set(best.per_task))
    diffs = [100 * (best.per_task[t] - seed.per_task[t]) for t in common]
    result = HoldoutResult(
        source=split.source, search_tasks=len(split.search), held_out=split.held_out, k=k, seed=seed, best=best,
        gain_points=round(100 * (best.pass_at_1 - seed.pass_at_1), 3), ci95_points=paired_ci(diffs),
        search_seed=_search_seed(ctx, scores), search_best=scores.best_pass_at_1)
    from ahe.io import atomic_write_json

    atomic_write_json(holdout_dir(ctx.run) / "result.json", result.model_dump(mode="json"))
    return result


def _search_seed(ctx: PhaseContext, scores: Scores) -> float | None:
    """The seed's pass@1 on the search split, measured as best's was: iteration 1's round on a line;
    under `search: tree` the seed node's pooled trials (every evaluation of it), as the tree's best."""
    if ctx.cfg.search == "tree":
        from ahe.evolution.tree.archive import load_tree

        seed = next((n for n in load_tree(ctx.run).nodes if n.kind == "seed" and n.n_trials > 0), None)
        if seed is not None:
            return round(seed.n_passed / seed.n_trials, 6)
    first = scores.get(1)
    return first.pass_at_1 if first else None


def words(r: HoldoutResult) -> str:
    """The side-by-side sentence history, audit and report share."""
    lo, hi = r.ci95_points
    iv = "" if lo is None else f" (95% interval {lo:+.1f} to {hi:+.1f})"
    search = ("n/a (best not measured as a whole)" if r.search_gain_points is None
              else f"{r.search_gain_points:+.1f} points ({r.search_seed:.3f} → {r.search_best:.3f})")
    return (f"gain on the search split {search}; on the sealed held-out split {r.gain_points:+.1f} points{iv} "
            f"({r.seed.pass_at_1:.3f} → {r.best.pass_at_1:.3f}, {len(r.held_out)} task(s) × k={r.k}) — "
            "the held-out gain is the number to trust: no decision saw those tasks")


async def finish_holdout(ctx: PhaseContext, split: Split | None, state) -> HoldoutResult | None:
    """The loop's last step (before it says it ended): done once, marked as iteration 0's `holdout`."""
    if split is None or state.is_done(0, "holdout"):
        return None
    result = await score_holdout(ctx, split, ctx.run.load_scores())
    if result is None:
        return None
    ctx.run.history(f"- held-out check of best (iteration {result.best.iteration}, {result.best.commit[:10]}) against the seed: "
                    + words(result))
    ctx.run.event("holdout", gain_points=result.gain_points, ci95_points=list(result.ci95_points),
                  search_gain_points=result.search_gain_points, held_out_tasks=len(result.held_out))
    state.mark(0, "holdout")
    ctx.run.save_state(state)
    return result
