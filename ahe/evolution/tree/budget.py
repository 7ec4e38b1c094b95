"""What the run's budgets leave for this round's children, in each budget's own unit, from the unit
costs measured on the run so far (the rule itself: ahe.evolution.tree_budget, docs/search.md).

`budgets.max_trials`: a child costs this round's line rollout in trials (an evolve call costs none); the
next line rollout, its re-evaluation and the held-out trials still owed are kept free; what is left counts every trial run so far.

Per budget of `budgets.max_tokens` / `budgets.max_cost_usd` (a role, or `total`):
- one evaluation round of a child = what this round's line rollout cost (scores.json, before the
  children's are added); without it, the round's trials × the bill's unit cost of one trial;
- one evolve call = the evolve tokens (dollars) spent so far / the evolve calls made so far, or the
  bill's start unit for one session before the first call;
- kept free: the next round's line rollout and this round's debugger spend again.
A role outside the budget costs nothing in it; an unpriced role costs no dollars (as the bill says).
The wall-clock budget is not allocated here (children run side by side): the loop checks it after a
phase, a round (ahe.evolution.tree.crossing) before each evolve call, evaluation and merge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ahe.evolution.tree_budget import Spend
from ahe.rollout.models import RunResults
from ahe.run_folder import read_model

if TYPE_CHECKING:
    from ahe.evolution.context import PhaseContext


def held_out_owed(ctx: "PhaseContext") -> int:
    """The held-out trials the run still owes (`holdout:`), read from its split.json: kept free too."""
    from ahe.evolution.holdout import Split, holdout_dir, trials_to_come

    split = read_model(holdout_dir(ctx.run) / "split.json", Split)
    return trials_to_come(ctx.cfg, split, ctx.run)


def round_trials(ctx: "PhaseContext", it: int) -> int:
    """One evaluation round's trials — a child's, the merge's, a finalist's: iteration `it`'s line
    rollout (its results.json; scores.json's count when that is missing; 0 before either)."""
    results = read_model(ctx.run.iteration(it).results_json, RunResults)
    if results is not None:
        return results.n_trials
    cur = ctx.run.load_scores().get(it)
    return cur.n_trials if cur else 0


def spends(ctx: "PhaseContext", it: int) -> list[Spend]:
    """One `Spend` per trial, token or dollar budget of the run (none without budgets)."""
    from ahe.evolution.bill import _measured, count_trials_spent, load_bill
    from ahe.evolution.forecast import Interval
    from ahe.evolution.forecast_build import _role_forecast

    cfg, b = ctx.cfg, ctx.cfg.budgets
    if not (b.max_tokens or b.max_cost_usd or b.max_trials):
        return []
    scores = ctx.run.load_scores()
    totals, cur = scores.totals(), scores.get(it)
    trials = round_trials(ctx, it)
    out: list[Spend] = []
    if b.max_trials is not None:  # a child costs its evaluation round's trials; an evolve call costs none
        keep = trials + (cur.reeval_trials if cur else 0) + held_out_owed(ctx)
        out.append(Spend(unit="trials", left=float(b.max_trials - count_trials_spent(ctx.run)), evolve_call=0.0,
                         evaluation=float(trials), reserve=float(keep)))
    if not (b.max_tokens or b.max_cost_usd):
        return out
    bill = load_bill(ctx.run)
    costs = _measured(ctx.run, bill.costs if bill else None)
    if costs is None:
        return out
    calls = ctx.run.tree_evolve_calls()

    def unit(field: str, role: str, n: float, one) -> float:
        rf = _role_forecast(cfg, role, Interval.of(n), one, {})
        if field == "tokens":
            return rf.total_tokens.mid
        return rf.cost_usd.mid if rf.cost_usd is not None else 0.0

    for field, limits, word in (("tokens", b.max_tokens, "tokens"), ("cost_usd", b.max_cost_usd, "dollars")):
        spent = totals[field]
        evolve = spent.get("evolve", 0.0) / calls if calls else unit(field, "evolve", 1, costs.evolve)
        debug = float((getattr(cur, field) if cur else {}).get("debugger", 0.0))
        line = float((getattr(cur, field) if cur else {}).get("agent", 0.0))  # this round's line rollout, as billed
        evaluation = line if line > 0 else unit(field, "agent", trials, costs.agent)
        for role, limit in limits.items():
            def pick(per_role: dict[str, float]) -> float:
                return sum(per_role.values()) if role == "total" else per_role.get(role, 0.0)
            out.append(Spend(unit=f"{word} ({role})", left=float(limit) - float(spent.get(role, 0.0)),
                             evolve_call=pick({"evolve": evolve}), evaluation=pick({"agent": evaluation}),
                             reserve=pick({"agent": evaluation, "debugger": debug})))
    return out


def words(spend: Spend | None, slots: int, affordable: int | None) -> str | None:
    """The round's allocation as the tree record and the history say it."""
    if spend is None:
        return None
    return (f"{spend.unit}: {spend.left:,.6g} left, {spend.reserve:,.6g} kept for the next line rollout; a child costs "
            f"{spend.child:,.6g} ({spend.evolve_call:,.6g} evolve call + {spend.evaluation:,.6g} evaluation): "
            f"{affordable} affordable, {slots} this round")
