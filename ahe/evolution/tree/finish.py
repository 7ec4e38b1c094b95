"""The tree's end: the last round caught up, the few best nodes re-evaluated (not when a budget
ended the run), the one rated best tagged `best` with its interval (history, tree.json, scores)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ahe.evolution.tree.archive import load_tree, save_tree
from ahe.evolution.tree_choice import finalists

if TYPE_CHECKING:
    from ahe.evolution.context import PhaseContext


async def finish_tree(ctx: "PhaseContext", reason: str) -> None:
    from ahe.evolution.tree.children import evaluate
    from ahe.evolution.tree.sync import add_evidence, sync

    tree = load_tree(ctx.run)
    if not tree.nodes and not ctx.run.iteration(1).results_json.exists():
        return
    state = ctx.run.load_state()
    last = max((it for it in ctx.run.iterations() if ctx.run.iteration(it).results_json.exists()), default=1)
    if not any(r.iteration == last for r in tree.rounds) or state.is_done(last, "rollback"):
        sync(ctx, tree, last)
    pool = [n for n in tree.nodes if n.n_trials > 0 or n.kind == "rollback"]
    tree.finalists = finalists([n.choice() for n in pool], ctx.cfg.tree.finalists)
    again = "budget" not in reason
    short: list[str] = []  # finalists a trial budget leaves no round for
    spent: list[str] = []  # finalists not started: a token or dollar budget counting the agent is reached
    for nid in tree.finalists if again else []:
        node = tree.node(nid)
        d = ctx.run.root / "tree-final" / nid
        folder = str(d.relative_to(ctx.run.root))
        if folder in node.evaluations:
            continue
        if not _round_fits(ctx, last):
            short.append(nid)
            continue
        bill_finalists(ctx, tree.finalists, last)  # the finalists before it counted (also those of a killed session)
        if _agent_budget_spent(ctx):
            spent.append(nid)
            continue
        ws = d / "workspace"
        ctx.repo.clone_at(ws, node.commit)
        results = await evaluate(ctx, ws, d)
        add_evidence(node, results, folder)
        save_tree(ctx.run, tree)
    if again:
        bill_finalists(ctx, tree.finalists, last)
    judged = [tree.node(i) for i in tree.finalists if tree.node(i).n_trials > 0] or [n for n in tree.nodes if n.n_trials > 0]
    best = max(judged, key=lambda n: (n.estimate()[0], n.n_trials, [-ord(c) for c in n.id]))
    mean, _ = best.estimate()
    lo, hi = best.interval()
    how = _how(ctx, tree.finalists, short, spent) if again else f"no re-evaluation ({reason})"
    tree.best = best.id
    tree.best_reason = f"{best.id}: estimated pass@1 {mean:.3f} [{lo:.3f}, {hi:.3f}] over {best.n_trials} trials; {how}"
    save_tree(ctx.run, tree)
    ctx.repo.tag("best", best.commit)
    scores = ctx.run.load_scores()
    # the round that evaluated it, as a line's history names its best ("best so far: iteration N"), else the round that made it
    first = next((sc.iteration for sc in scores.iterations if sc.harness_commit == best.commit), best.iteration)
    scores.best_commit, scores.best_iteration = best.commit, first
    scores.best_pass_at_1 = scores.best_metric_value = round(best.n_passed / best.n_trials, 6)
    ctx.run.save_scores(scores)
    ctx.run.history(f"  - search tree: best {tree.best_reason} (path {' → '.join(tree.path(best.id))})")


def best_words(run) -> str | None:
    """The tree's `best` as history's last line names it: node, commit, estimate with its interval, path."""
    tree = load_tree(run)
    if tree.best is None:
        return None
    best = tree.node(tree.best)
    mean, _ = best.estimate()
    lo, hi = best.interval()
    return (f"{best.id} ({best.commit[:10]}) of the search tree, estimated pass@1 {mean:.3f} [{lo:.3f}, {hi:.3f}] "
            f"over {best.n_trials} trials, path {' → '.join(tree.path(best.id))}")


def _round_fits(ctx: "PhaseContext", last: int) -> bool:
    """Does one more evaluation round (the last round's trials) fit in `budgets.max_trials`, with the
    held-out trials still owed kept free?"""
    from ahe.evolution.bill import count_trials_spent
    from ahe.evolution.tree.budget import held_out_owed, round_trials

    limit = ctx.cfg.budgets.max_trials
    if limit is None:
        return True
    return count_trials_spent(ctx.run) + round_trials(ctx, last) + held_out_owed(ctx) <= limit


def bill_finalists(ctx: "PhaseContext", finalists: list[str], it: int) -> None:
    """The finalists' re-evaluation in scores.json: agent trials, so iteration `it`'s `agent` tokens and
    dollars, its share kept as phase `finish`'s (`spent_by_phase["finish/agent"]`), set from their
    folders' results — a re-evaluation resumed after a kill counts once. (A run of an older AHE keeps
    them under a pseudo-role `finalists`, which the bill still counts as agent.)"""
    from ahe.rollout.models import RunResults
    from ahe.run_folder import read_model

    done = [r for nid in finalists if (r := read_model(ctx.run.root / "tree-final" / nid / "results.json", RunResults))]
    scores = ctx.run.load_scores()
    score = scores.get(it)
    if score is None or not done:
        return
    score.add_spend("finish", "agent", sum(r.usage.total_tokens for r in done), sum(float(r.usage.cost_usd or 0.0) for r in done))
    scores.upsert(score)
    ctx.run.save_scores(scores)


def _agent_budget_spent(ctx: "PhaseContext") -> str | None:
    """A token or dollar budget counting the agent's trials (`agent` or `total`) that is reached, in words."""
    from ahe.evolution.budget_spent import spent_budget

    return spent_budget(ctx.cfg.budgets, ctx.run.load_scores().totals(), roles=("agent",))


def _how(ctx: "PhaseContext", finalists: list[str], short: list[str], spent: list[str]) -> str:
    """Which finalists were re-evaluated, which not and why, and a budget their re-evaluation reached."""
    done = [i for i in finalists if i not in short and i not in spent]
    parts = ["re-evaluated " + ", ".join(done)] if done else []
    if short:
        parts.append(f"not {', '.join(short)} (the trial budget of {ctx.cfg.budgets.max_trials:,} leaves no round for it)")
    reached = _agent_budget_spent(ctx)
    if spent:
        parts.append(f"not {', '.join(spent)} (a spent budget: {reached})")
    elif reached and done:
        parts.append(f"their re-evaluation spent a budget: {reached}")
    return "; ".join(parts)
