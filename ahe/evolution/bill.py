"""The bill kept true while a run goes (issue 37): bill.json beside scores.json (docs/loop.md).

At the start `ahe evolve` writes the forecast (`ahe plan`'s, from `--from RUN` or the stated
defaults). After every phase it appends an entry: what was spent so far (trials, tokens per
role, dollars of the priced roles, hours) and the projected total at the end — spent plus the
phases still to run (ahe.evolution.forecast.phase_plan) times the unit costs measured on this
run so far (the start's unit costs for a role not measured yet) — with its interval, the finish
time, and the first budget the projection reaches. When the loop ends, the forecast made at the
start is put against the actual, quantity by quantity.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel, Field

from ahe.config import ExperimentConfig
from ahe.evolution.forecast import ZERO, Forecast, Interval, UnitCost, UnitCosts, count_tasks, phase_plan
from ahe.evolution.forecast_build import ROLE_ORDER, _price, _role_forecast, _seconds
from ahe.evolution.holdout import holdout_dir
from ahe.io import atomic_write_text
from ahe.run_folder import RunFolder, Scores
from ahe.run_folder.folder import read_model

BILL_FILE = "bill.json"
BILLED_AS = {"agent": ("agent", "finalists")}  # scores.json's `finalists` (the tree's, re-evaluated at the end) are agent trials


class Quantity(BaseModel):
    spent: float
    projected: Interval  # the total at the end: spent + what the phases still to run will cost


class BillEntry(BaseModel):
    at: str  # UTC, ISO
    iteration: int
    phase: str  # the phase just finished
    trials: Quantity
    tokens: dict[str, Quantity]  # per role, and "total"
    cost_usd: Quantity | None  # the priced roles only; None when no role has a price
    cost_by_role: dict[str, float] = Field(default_factory=dict)  # dollars spent so far per priced role
    unpriced_roles: list[str] = Field(default_factory=list)
    hours: Quantity
    finish_at: Interval  # projected finish, seconds since the epoch (UTC)
    budget: str | None = None  # the first budget the projection's middle reaches, and where


class ForecastCheck(BaseModel):
    quantity: str  # trials, tokens:<role>, tokens:total, cost_usd:<role>, cost_usd (priced roles), hours
    forecast: Interval
    actual: float
    inside: bool  # low <= actual <= high
    ratio: float | None  # actual / forecast's middle


class Bill(BaseModel):
    forecast: Forecast | None = None  # made when the run started
    costs: UnitCosts | None = None  # the unit costs it was made from
    entries: list[BillEntry] = Field(default_factory=list)
    check: list[ForecastCheck] = Field(default_factory=list)  # written when the loop ends
    ended: str | None = None  # why the loop ended (a run ended early is checked against the whole forecast)


def load_bill(run: RunFolder) -> Bill | None:
    return read_model(run.root / BILL_FILE, Bill)


def save_bill(run: RunFolder, bill: Bill) -> None:
    atomic_write_text(run.root / BILL_FILE, bill.model_dump_json(indent=1))


def start_bill(run: RunFolder, cfg: ExperimentConfig, source_run: Path | None = None) -> Bill:
    """The forecast at the start of a run (kept as it is on a resume)."""
    old = load_bill(run)
    if old is not None:
        return old
    from ahe.evolution.forecast_build import build_forecast
    from ahe.evolution.forecast_sources import default_costs, run_costs

    _, kind = count_tasks(cfg)
    costs = run_costs(source_run) if source_run is not None else default_costs(kind)
    bill = Bill(forecast=build_forecast(cfg, costs, config_name=cfg.name), costs=costs)
    save_bill(run, bill)
    return bill


# ---------------------------------------------------------------------------- the live bill
def _measured(run: RunFolder, start: UnitCosts | None) -> UnitCosts | None:
    """Unit costs measured on this run so far; a role not measured yet keeps the start's."""
    from ahe.errors import AheError
    from ahe.evolution.forecast_sources import run_costs

    try:
        now = run_costs(run.root)
    except AheError:
        return start
    if start is None:
        return now
    rounds = sum(1 for s in run.load_scores().iterations if "evolve" in s.timings_sec)
    merged = {}
    for r in ("agent", "debugger", "evolve", "explore"):
        mine, theirs = getattr(now, r), getattr(start, r)
        if mine.tokens <= 0:
            merged[r] = theirs
        elif rounds < 2:  # one round tells nothing of the variation between rounds: keep the start's, if wider
            merged[r] = mine.model_copy(update={"spread": max(mine.spread, theirs.spread)})
        else:
            merged[r] = mine
    return now.model_copy(update={**merged, "reeval_per_round": now.reeval_per_round if now.reeval_per_round is not None
                                  else start.reeval_per_round, "trial_wall_sec": now.trial_wall_sec or start.trial_wall_sec})


def count_trials_spent(run: RunFolder) -> int:
    """Every finished trial of the run: rollouts, re-evaluations, variants, the tree's children and
    finalists (RUN/tree-final) and the held-out scoring (a `trial-*` folder with its result.json)."""

    held, final = holdout_dir(run), run.root / "tree-final"  # the search tree's finalists, re-evaluated at the end
    return sum(_finished_trials(d, 0) for d in (run.iterations_dir, held, final))


_NOT_TRIALS = frozenset({"workspace", ".git"})  # a harness clone (a tree child's, a variant's): no trial lives there


def _finished_trials(folder: Path, depth: int) -> int:
    """The `trial-*/result.json` under `folder`'s subfolders, without walking into a trial (its sandbox
    files) or a harness clone: called after every phase, it stays milliseconds on a night's run
    (a glob of `*/**/trial-*/result.json` walked every file of every trial and clone)."""
    import os

    n = 0
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    for e in entries:
        if not e.is_dir(follow_symlinks=False) or e.name in _NOT_TRIALS:
            continue
        if e.name.startswith("trial-") and depth >= 1:
            n += os.path.exists(os.path.join(e.path, "result.json"))
        else:
            n += _finished_trials(Path(e.path), depth + 1)
    return n


def remaining(cfg: ExperimentConfig, tasks: int, done: dict[str, list[str]], observed: float | None):
    return [(it, ph, spend) for it, ph, spend in phase_plan(cfg, tasks, observed) if ph not in done.get(f"{it:03d}", [])]


def bill_entry(cfg: ExperimentConfig, run: RunFolder, scores: Scores, done: dict[str, list[str]], elapsed_sec: float,
               it: int, phase: str, start: UnitCosts | None, *, tasks: int, ended: bool = False) -> BillEntry:
    """What was spent so far and the projection; `ended`: the loop's end (nothing left to run)."""
    costs = _measured(run, start)
    totals = scores.totals()
    left = [] if ended else remaining(cfg, tasks, done, costs.reeval_per_round if costs else None)
    units = {r: ZERO for r in ROLE_ORDER}
    seconds = ZERO
    unit = {r: (getattr(costs, "agent" if r == "reeval" else r) if costs else UnitCost()) for r in ROLE_ORDER}
    for _, _, spend in left:
        for role, n in spend.items():
            units[role] = units[role].plus(n)
            sec = _seconds(cfg, costs, role, n.mid, unit[role]) if costs else 0.0
            seconds = seconds.plus(Interval.of(sec, unit[role].spread))
    tokens: dict[str, Quantity] = {}
    cost_spent = cost_left = None
    unpriced: list[str] = []
    by_role: dict[str, float] = {}
    for role in ROLE_ORDER:
        rf = _role_forecast(cfg, role, units[role], unit[role], {})
        spent = float(sum(totals["tokens"].get(r, 0) for r in BILLED_AS.get(role, (role,))))
        if spent or units[role].high:
            tokens[role] = Quantity(spent=spent, projected=rf.total_tokens.plus(Interval.of(spent)))
        if _price(cfg, role, {})[1] is None:
            if spent or units[role].high:
                unpriced.append(role)
            continue
        usd = float(sum(totals["cost_usd"].get(r, 0.0) for r in BILLED_AS.get(role, (role,))))
        cost_spent = (cost_spent or 0.0) + usd
        by_role[role] = usd
        cost_left = (cost_left or ZERO).plus(rf.cost_usd or ZERO)
    total_spent = sum(q.spent for q in tokens.values())
    tokens["total"] = Quantity(spent=total_spent, projected=_sum([q.projected for q in tokens.values()]))
    trials_left = units["agent"].plus(units["reeval"])
    n_trials = float(count_trials_spent(run))
    now = time.time()
    entry = BillEntry(
        at=datetime.now(timezone.utc).isoformat(timespec="seconds"), iteration=it, phase=phase,
        trials=Quantity(spent=n_trials, projected=trials_left.plus(Interval.of(n_trials))), tokens=tokens,
        cost_usd=None if cost_spent is None else Quantity(spent=cost_spent, projected=(cost_left or ZERO).plus(Interval.of(cost_spent))),
        cost_by_role=by_role, unpriced_roles=unpriced, hours=Quantity(spent=elapsed_sec / 3600, projected=seconds.scale(1 / 3600).plus(Interval.of(elapsed_sec / 3600))),
        finish_at=seconds.plus(Interval.of(now)))
    entry.budget = _budget_projected(cfg, totals, left, unit, elapsed_sec, costs, trials=n_trials)
    return entry


def _sum(ivs: list[Interval]) -> Interval:
    out = ZERO
    for iv in ivs:
        out = out.plus(iv)
    return out


def _budget_projected(cfg: ExperimentConfig, totals: dict, left, unit: dict[str, UnitCost], elapsed_sec: float,
                      costs: UnitCosts | None, *, trials: float = 0.0) -> str | None:
    """Walk the phases still to run at the projection's middle; the first budget reached, and where."""
    b = cfg.budgets
    if not (b.max_tokens or b.max_cost_usd or b.wall_clock_hours or b.max_trials) or costs is None:
        return None
    tok = {r: float(v) for r, v in totals["tokens"].items() if r != "total"}
    usd = {r: float(v) for r, v in totals["cost_usd"].items() if r != "total"}
    sec = elapsed_sec
    for it, phase, spend in left:
        trials += sum(n.mid for role, n in spend.items() if role in ("agent", "reeval"))
        if b.max_trials is not None and trials >= b.max_trials:
            return f"the trial budget ({b.max_trials:,}) is projected to be reached in iteration {it} ({phase})"
        for role, n in spend.items():
            tok[role] = tok.get(role, 0.0) + n.mid * unit[role].tokens
            rf = _role_forecast(cfg, role, n, unit[role], {})
            if rf.cost_usd is not None:
                usd[role] = usd.get(role, 0.0) + rf.cost_usd.mid
            sec += _seconds(cfg, costs, role, n.mid, unit[role])
        for field, limits, have in (("token", b.max_tokens, tok), ("cost", b.max_cost_usd, usd)):
            for role, limit in limits.items():
                value = sum(have.values()) if role == "total" else have.get(role, 0.0)
                if value >= limit:
                    what = f"{limit:,}" if field == "token" else f"${limit}"
                    return f"the {field} budget of {role} ({what}) is projected to be reached in iteration {it} ({phase})"
        if b.wall_clock_hours is not None and sec >= b.wall_clock_hours * 3600:
            return f"the wall-clock budget of {b.wall_clock_hours} h is projected to be reached in iteration {it} ({phase})"
    return None


# ---------------------------------------------------------------------------- forecast vs actual
def check_forecast(fc: Forecast, last: BillEntry) -> list[ForecastCheck]:
    """The forecast made at the start against the actual at the end, quantity by quantity."""
    pairs: list[tuple[str, Interval, float]] = [("trials", fc.trials.total, last.trials.spent)]
    for rf in fc.roles:
        pairs.append((f"tokens:{rf.role}", rf.total_tokens, last.tokens[rf.role].spent if rf.role in last.tokens else 0.0))
    pairs.append(("tokens:total", fc.total_tokens, last.tokens["total"].spent))
    for rf in fc.roles:
        if rf.cost_usd is not None and rf.role in last.cost_by_role:
            pairs.append((f"cost_usd:{rf.role}", rf.cost_usd, last.cost_by_role[rf.role]))
    if fc.cost_usd is not None and last.cost_usd is not None:
        pairs.append(("cost_usd", fc.cost_usd, last.cost_usd.spent))
    pairs.append(("hours", fc.hours, last.hours.spent))
    return [ForecastCheck(quantity=q, forecast=iv, actual=a, inside=iv.low - 1e-9 <= a <= iv.high + 1e-9,
                          ratio=round(a / iv.mid, 3) if iv.mid else None) for q, iv, a in pairs]


def words(e: BillEntry) -> str:
    """The progress line: spent so far and the projected total with its interval."""
    def n(x: float) -> str:
        for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if abs(x) >= div:
                return f"{x / div:.1f}{unit}"
        return f"{x:.0f}"

    def iv(q: Interval, f=n) -> str:
        return f"{f(q.mid)} ({f(q.low)}–{f(q.high)})"

    tok, hrs = e.tokens["total"], e.hours
    usd = (f", ${e.cost_usd.spent:,.2f} of ${e.cost_usd.projected.mid:,.2f} (${e.cost_usd.projected.low:,.2f}–"
           f"${e.cost_usd.projected.high:,.2f})" if e.cost_usd else ", dollars: no price")
    clock = lambda t: datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M")  # noqa: E731
    return (f"bill: {n(tok.spent)} of {iv(tok.projected)} tokens{usd}; {e.trials.spent:.0f} of {iv(e.trials.projected)} "
            f"trials; {hrs.spent:.2f} of {iv(hrs.projected, lambda h: f'{h:.2f}')} h, finish ~{clock(e.finish_at.mid)} UTC "
            f"({clock(e.finish_at.low)}–{clock(e.finish_at.high)})")



# ---------------------------------------------------------------------------- budgets ahead
def budget_ahead(cfg: ExperimentConfig, scores: Scores, it: int, elapsed_sec: float, *, reserve_trials: int = 0,
                 search_allocates: bool = False, trials_spent: int = 0) -> str | None:
    """Before iteration it's edits: would they and their evaluation cross a budget? Projected as
    iteration it-1's debugger and evolve spend, its variants' evaluation, and this round's evaluation
    (tokens, dollars, and the same phases' seconds for the wall clock; for `max_trials` this round's
    rollout and re-evaluation trials again, and the variants' rounds); if so the run ends here, at a
    round boundary, with every harness it made evaluated and H_best judged. `reserve_trials` (the
    held-out scoring still owed) is kept free at this round's agent spend per trial. With
    `search_allocates` (search: tree) the evolve calls and the children's evaluation are left out of
    the token and dollar projection: the tree's own allocation fits them to what is left
    (ahe.evolution.tree_budget) and ends the run when no child fits."""
    prev, cur = scores.get(it - 1), scores.get(it)
    if prev is None or cur is None:
        return None
    totals = scores.totals()
    per_trial = reserve_trials / cur.n_trials if cur.n_trials else 0.0
    variants = {"tokens": 0, "cost_usd": 0.0} if search_allocates else {"tokens": prev.variant_tokens, "cost_usd": prev.variant_cost_usd}
    fixed = ("debugger",) if search_allocates else ("debugger", "evolve")
    for field, limits in (("tokens", cfg.budgets.max_tokens), ("cost_usd", cfg.budgets.max_cost_usd)):
        ahead = {r: v for r, v in getattr(prev, field).items() if r in fixed}
        agent = getattr(cur, field).get("agent", 0)
        ahead["agent"] = variants[field] + agent + agent * per_trial
        ahead["reeval"] = getattr(cur, field).get("reeval", 0)
        for role, limit in limits.items():
            add = sum(ahead.values()) if role == "total" else ahead.get(role, 0)
            if add and totals[field].get(role, 0) + add >= limit:
                what = f"token budget of {role} ({limit:,})" if field == "tokens" else f"cost budget of {role} (${limit})"
                held = f" and the {reserve_trials} held-out trials still owed" if reserve_trials else ""
                return (f"the {what} would be reached by iteration {it}'s edits and their evaluation{held} (projected "
                        f"from iteration {it - 1}); stopped before them, at the round boundary")
    if cfg.budgets.max_trials is not None:
        variants = 0 if search_allocates or cfg.variants <= 1 else cfg.variants * cur.n_trials
        ahead_trials = variants + cur.n_trials + cur.reeval_trials + reserve_trials
        if trials_spent + ahead_trials > cfg.budgets.max_trials:
            held = f", {reserve_trials} of them held-out trials still owed" if reserve_trials else ""
            return (f"the trial budget ({cfg.budgets.max_trials:,}) would be crossed by iteration {it}'s edits and their "
                    f"evaluation ({trials_spent:,} run, {ahead_trials:,} more projected from iteration {it - 1}{held}); "
                    f"stopped before them, at the round boundary")
    hours = cfg.budgets.wall_clock_hours
    if hours is not None:
        sec = sum(prev.timings_sec.get(p, 0.0) for p in ("debug", "evolve"))
        sec += sum(cur.timings_sec.get(p, 0.0) for p in ("rollout", "attribution", "rollback"))
        sec += cur.timings_sec.get("rollout", 0.0) * per_trial
        if sec and elapsed_sec + sec >= hours * 3600:
            return (f"the wall-clock budget of {hours} h would be reached by iteration {it}'s edits and their evaluation "
                    f"(projected from iteration {it - 1}'s {sec / 60:.1f} min); stopped before them, at the round boundary")
    return None
