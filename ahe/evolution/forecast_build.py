"""Counts × unit costs → the forecast, priced, timed and checked against `budgets:` (ahe.evolution.forecast)."""

from __future__ import annotations

import math
from pathlib import Path

from ahe.config import ExperimentConfig
from ahe.errors import AheError
from ahe.evolution.forecast import (ZERO, BudgetVerdict, Forecast, Interval, RoleForecast, UnitCost, UnitCosts,
                                    count_tasks, count_trials, phase_plan)
from ahe.evolution.forecast_sources import DEFAULTS
from ahe.llm.types import Price
from ahe.llm.usage import cost_of
from ahe.llm.types import Usage

ROLE_ORDER = ("agent", "reeval", "debugger", "evolve", "explore")


def load_prices(path: Path | None) -> dict[str, Price]:
    """--prices FILE: a YAML mapping of model → {input, output, cached_input} in USD per million tokens."""
    if path is None:
        return {}
    import yaml
    from pydantic import ValidationError

    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise AheError(f"--prices {path}: cannot be read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise AheError(f"--prices {path}: not valid YAML" + (f" (line {mark.line + 1})" if mark else "")) from None
    if not isinstance(data, dict):
        raise AheError(f"--prices {path}: must map each model to {{input, output, cached_input}} (USD per million tokens)")
    out: dict[str, Price] = {}
    for m, p in data.items():
        try:
            out[str(m)] = Price.model_validate(p)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(x) for x in (m, *err["loc"]))
            raise AheError(f"--prices {path}: {where}: {err['msg']}") from None
    return out


def role_model(cfg: ExperimentConfig, role: str):
    if role in ("agent", "reeval"):
        return cfg.models.agent
    if role == "explore":
        return cfg.models.explore or cfg.models.evolve
    return getattr(cfg.models, role)


def _unit(costs: UnitCosts, role: str, kind: str, notes: list[str]) -> UnitCost:
    unit: UnitCost = getattr(costs, "agent" if role == "reeval" else role)
    if unit.tokens <= 0 and costs.source != "defaults" and role != "reeval":
        notes.append(f"{role}: not measured in the source; AHE's default for {kind} tasks is used")
        return DEFAULTS[kind][role]
    return unit


def _seconds(cfg: ExperimentConfig, costs: UnitCosts, role: str, units: float, unit: UnitCost) -> float:
    if role in ("agent", "reeval"):
        if units <= 0:
            return 0.0
        slots = min(cfg.concurrency, units)
        if costs.trial_wall_sec:
            return units * costs.trial_wall_sec / slots
        return math.ceil(units / cfg.concurrency) * unit.seconds
    if role == "debugger":
        return units * unit.seconds / cfg.debugger.concurrency
    if role == "evolve" and units and cfg.search != "tree":
        return unit.seconds  # variants' sessions run side by side; a tree's evolve calls one after the other
    return unit.seconds * units


def apply_prices(cfg: ExperimentConfig, prices: dict[str, Price]) -> ExperimentConfig:
    """Every role's prices with the file's under them (a role's own win): what the run bills and a
    pilot's trials are priced by."""
    if not prices:
        return cfg
    models = {name: role.model_copy(update={"prices": {**prices, **role.prices}}) if role is not None else None
              for name, role in ((n, getattr(cfg.models, n)) for n in type(cfg.models).model_fields)}
    return cfg.model_copy(update={"models": cfg.models.model_copy(update=models)})


def _price(cfg: ExperimentConfig, role: str, prices: dict[str, Price]) -> tuple[str | None, Price | None]:
    rc = role_model(cfg, role)
    model = rc.model
    if model is None:
        return None, None
    return model, rc.prices.get(model) or prices.get(model)


def build_forecast(cfg: ExperimentConfig, costs: UnitCosts, *, prices: dict[str, Price] | None = None,
                   config_name: str = "") -> Forecast:
    tasks, kind = count_tasks(cfg)
    notes: list[str] = list(costs.assumptions)
    plan = phase_plan(cfg, tasks, costs.reeval_per_round)
    used = {role for _, _, spend in plan for role in spend}
    units = {r: _unit(costs, r, kind, notes) if r in used else UnitCost() for r in ROLE_ORDER}
    totals: dict[str, Interval] = {r: ZERO for r in ROLE_ORDER}
    hours = ZERO
    timeline: list[tuple[int, str, dict[str, Interval], Interval]] = []
    for it, phase, spend in plan:
        for role, n in spend.items():
            totals[role] = totals[role].plus(n)
            sec = _seconds(cfg, costs, role, n.mid, units[role])
            hours = hours.plus(Interval.of(sec / 3600, units[role].spread))
        timeline.append((it, phase, dict(totals), hours))
    roles = [_role_forecast(cfg, r, totals[r], units[r], prices or {}) for r in ROLE_ORDER if totals[r].high > 0]
    total_tokens = ZERO
    cost: Interval | None = None
    for rf in roles:
        total_tokens = total_tokens.plus(rf.total_tokens)
        if rf.cost_usd is not None:
            cost = rf.cost_usd if cost is None else cost.plus(rf.cost_usd)
    notes += _count_notes(cfg, tasks, kind)
    return Forecast(
        config=config_name, source=costs.source, source_detail=costs.detail, executor=cfg.executor,
        concurrency=cfg.concurrency, trials=count_trials(cfg, tasks, costs.reeval_per_round), roles=roles,
        total_tokens=total_tokens, cost_usd=cost, unpriced_roles=[r.role for r in roles if r.cost_usd is None],
        hours=hours, budget=check_budget(cfg, timeline, units, prices or {}), assumptions=notes)


def _role_forecast(cfg: ExperimentConfig, role: str, n: Interval, unit: UnitCost, prices: dict[str, Price]) -> RoleForecast:
    def tok(x: float) -> Interval:
        return n.times(Interval.of(x, unit.spread))

    model, price = _price(cfg, role, prices)
    cost = None
    if price is not None:
        per = cost_of(Usage(prompt_tokens=round(unit.input), cached_tokens=round(unit.cached),
                            completion_tokens=round(unit.output)), price)
        cost = tok(per)
    return RoleForecast(role=role, model=model, units=n, input_tokens=tok(unit.input), cached_tokens=tok(unit.cached),
                        output_tokens=tok(unit.output), total_tokens=tok(unit.tokens), cost_usd=cost,
                        price=(f"${price.input}/{price.cached_input if price.cached_input is not None else price.input}/"
                               f"{price.output} per Mtok (input/cached/output)") if price else "no price")


def _count_notes(cfg: ExperimentConfig, tasks: int, kind: str) -> list[str]:
    rounds = cfg.iterations + (1 if cfg.evaluate_final else 0)
    out = [f"{tasks} {kind} tasks × k={cfg.k} × {rounds} rollouts ({cfg.iterations} iterations"
           + (" + the final evaluation)" if cfg.evaluate_final else ")"),
           "no infra errors: a retried trial (retry_infra) costs once more"]
    s = cfg.attribution.strictness
    if s in ("noise", "expected-value"):
        out.append(f"re-evaluation ({s}) in iterations 2..{rounds}: from 0 up to its budget per round "
                   f"(reeval_share {cfg.attribution.reeval_share}" + (f", reeval_ceiling {cfg.attribution.reeval_ceiling})" if s == "expected-value" else ")"))
    if cfg.search == "tree":
        t = cfg.tree
        out.append(f"search tree: {t.width} evolve sessions per iteration and 0 to {t.width + (1 if t.merge else 0)} child "
                   f"evaluations (mid {t.width}) of tasks × k trials, then up to {t.finalists} finalists re-evaluated")
    elif cfg.variants > 1:
        out.append(f"{cfg.variants} variants per iteration: {cfg.variants} evolve sessions and {cfg.variants} × tasks × k trials")
    out.append(f"wall clock: {cfg.executor} executor, {cfg.concurrency} trials at once, debugger {cfg.debugger.concurrency} at once")
    return out


def check_budget(cfg: ExperimentConfig, timeline, units: dict[str, UnitCost], prices: dict[str, Price]) -> BudgetVerdict:
    """Walk the phases as the loop does (it checks after each phase) and say where a budget is reached."""
    b = cfg.budgets
    if not (b.max_tokens or b.max_cost_usd or b.wall_clock_hours or b.max_trials):
        return BudgetVerdict(stops=False, reason="no budgets configured")

    def spent(totals: dict[str, Interval], hours: Interval, end: str) -> str | None:
        trials = sum(getattr(totals[r], end) for r in ("agent", "reeval") if r in totals)
        if b.max_trials is not None and trials >= b.max_trials:
            return f"trial budget ({b.max_trials:,})"
        tok = {r: getattr(totals[r].times(Interval.of(units[r].tokens, units[r].spread)), end) for r in totals}
        tok["total"] = sum(tok.values())
        for role, limit in b.max_tokens.items():
            if tok.get(role, 0) >= limit:
                return f"token budget of {role} ({limit:,})"
        for role, limit in b.max_cost_usd.items():
            cost = {r: getattr(c, end) for r in totals if (c := _role_forecast(cfg, r, totals[r], units[r], prices).cost_usd)}
            cost["total"] = sum(cost.values())
            if cost.get(role, 0.0) >= limit:
                return f"cost budget of {role} (${limit})"
        if b.wall_clock_hours is not None and getattr(hours, end) >= b.wall_clock_hours:
            return f"wall-clock budget of {b.wall_clock_hours} h"
        return None

    for it, phase, totals, hours in timeline:
        hit = spent(totals, hours, "mid")
        if hit:
            return BudgetVerdict(stops=True, iteration=it, phase=phase,
                                 reason=f"the {hit} is reached in iteration {it} (after its {phase}) of {cfg.iterations}")
    for it, phase, totals, hours in timeline:
        hit = spent(totals, hours, "high")
        if hit:
            return BudgetVerdict(stops=False, may_stop=True, iteration=it, phase=phase,
                                 reason=f"the forecast's middle fits the budgets; at the interval's high end the {hit} "
                                        f"is reached in iteration {it} (after its {phase})")
    return BudgetVerdict(stops=False, reason="the budgets are not reached, even at the interval's high end")
