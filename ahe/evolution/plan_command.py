"""`ahe plan CONFIG` and `ahe evolve --plan`: the forecast, printed or as JSON (docs/cli.md)."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ahe.config import ExperimentConfig
from ahe.errors import AheError
from ahe.evolution.forecast import RUN_SPREAD_FLOOR, Forecast, Interval, UnitCost, UnitCosts, count_tasks
from ahe.evolution.forecast_build import apply_prices, build_forecast, load_prices
from ahe.evolution.forecast_sources import DEFAULTS, default_costs, run_costs
from ahe.tempdirs import temp_dir


def plan_forecast(cfg: ExperimentConfig, *, source_run: Path | None = None, pilot: int = 0,
                  prices_file: Path | None = None, config_name: str = "") -> Forecast:
    prices = load_prices(prices_file)
    cfg = apply_prices(cfg, prices)  # a pilot's trials are priced as the forecast is (found by helper h37b)
    _, kind = count_tasks(cfg)
    pilot_cost = None
    if source_run is not None:
        costs = run_costs(source_run)
    elif pilot > 0:
        costs, pilot_cost = run_pilot(cfg, pilot, kind, prices)
    else:
        costs = default_costs(kind)
    fc = build_forecast(cfg, costs, prices=prices, config_name=config_name)
    return fc.model_copy(update={"pilot_cost": pilot_cost}) if pilot_cost else fc


def run_pilot(cfg: ExperimentConfig, n: int, kind: str, prices: dict) -> tuple[UnitCosts, dict[str, float | None]]:
    """N trials of the seed harness, one per task (the first N), with the configured agent model."""
    from ahe.evolution.loop import SEED_DEFAULT, mock_endpoints
    from ahe.rollout.scheduler import RolloutConfig, run_rollouts

    names = sorted(p.parent.name for p in Path(cfg.tasks).glob("*/task.toml"))
    if cfg.include:
        import fnmatch

        names = [t for t in names if any(fnmatch.fnmatch(t, pat) for pat in cfg.include)]
    chosen = (names * n)[:n]
    k = max(1, -(-n // max(len(names), 1)))
    t0 = time.monotonic()
    with temp_dir("pilot") as tmp, mock_endpoints(cfg) as urls:
        ws = Path(tmp) / "workspace"
        shutil.copytree(cfg.seed_workspace or SEED_DEFAULT, ws)
        role = cfg.models.agent
        if urls.get("agent"):
            role = role.model_copy(update={"base_url": urls["agent"], "model": role.model or "mock"})
        rc = RolloutConfig(**{**cfg.rollout_settings(), "include": sorted(set(chosen)), "k": k},
                           tasks_dir=Path(cfg.tasks), workspace=ws, agent_role=role)
        results = asyncio.run(run_rollouts(rc, Path(tmp) / "pilot"))
        trials = sorted((Path(tmp) / "pilot" / "rollouts").glob("*/trial-*/result.json"))[:max(n, 1)]
        import json

        rows = [json.loads(p.read_text()) for p in trials]
    wall = time.monotonic() - t0
    if not rows:
        raise AheError("--pilot: no trial finished; check the agent model with `ahe doctor`")
    u = [r.get("usage") or {} for r in rows]
    m = len(rows)
    agent = UnitCost(input=sum(x.get("prompt_tokens", 0) for x in u) / m, cached=sum(x.get("cached_tokens", 0) for x in u) / m,
                     output=sum(x.get("completion_tokens", 0) for x in u) / m,
                     seconds=sum(float(r.get("duration_sec") or 0) for r in rows) / m, spread=max(RUN_SPREAD_FLOOR, 0.5))
    d = DEFAULTS[kind]
    costs = UnitCosts(source="pilot", detail=f"a pilot of {m} trials, run now", agent=agent, debugger=d["debugger"],
                      evolve=d["evolve"], explore=d["explore"],
                      assumptions=[f"agent unit cost measured on a pilot of {m} trials of the seed harness; the debugger's, "
                                   f"evolve's and explore's are AHE's defaults for {kind} tasks"])
    cost = results.usage.cost_usd
    return costs, {"trials": float(m), "tokens": float(results.usage.total_tokens), "seconds": round(wall, 1),
                   "cost_usd": None if cost is None else float(cost)}


# ---------------------------------------------------------------------------- printing
def _n(x: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.1f}{unit}"
    return f"{x:.0f}"


def _iv(iv: Interval | None, fmt=_n) -> str:
    if iv is None:
        return "no price"
    return f"{fmt(iv.mid)} ({fmt(iv.low)}–{fmt(iv.high)})"


def _usd(x: float) -> str:
    return f"${x:,.2f}"


def render(fc: Forecast, console: Console) -> None:
    if fc.pilot_cost:
        p = fc.pilot_cost
        console.print(f"[yellow]ran a pilot of {p['trials']:.0f} trials: {_n(p['tokens'])} tokens, {p['seconds']:.0f} s, "
                      f"{'no price' if p['cost_usd'] is None else _usd(p['cost_usd'])}[/]")
    console.print(escape(f"plan for {fc.config or 'the config'} — unit costs from {fc.source}: {fc.source_detail}"))
    t = fc.trials
    console.print(f"trials: {_iv(t.total)}  = {t.rollout} rollout ({t.tasks} tasks × k={t.k} × {t.rounds})"
                  + (f" + {t.variants} child evaluations (variants; a tree's children, merges and finalists)" if t.variants else "")
                  + (f" + re-evaluation {_iv(t.reeval)}" if t.reeval.high else "")
                  + (f" + {t.holdout} held-out (seed and best on the sealed split)" if t.holdout else ""))
    table = Table("role", "model", "units", "input", "cached", "output", "total tokens (interval)", "dollars (interval)", "price")
    for r in fc.roles:
        table.add_row(r.role, escape(r.model or "(unset)"), _n(r.units.mid), _n(r.input_tokens.mid), _n(r.cached_tokens.mid),
                      _n(r.output_tokens.mid), _iv(r.total_tokens), _iv(r.cost_usd, _usd), escape(r.price))
    console.print(table)
    cost = _iv(fc.cost_usd, _usd) if fc.cost_usd else "no price"
    unpriced = f" (without {', '.join(fc.unpriced_roles)}: no price)" if fc.unpriced_roles and fc.cost_usd else ""
    console.print(f"total tokens: {_iv(fc.total_tokens)}   dollars: {cost}{unpriced}")
    console.print(f"wall clock: {_iv(fc.hours, lambda h: f'{h:.2f} h')} ({escape(fc.executor)} executor, {fc.concurrency} at once)")
    style = "red" if fc.budget.stops else ("yellow" if fc.budget.may_stop else "green")
    console.print(f"[{style}]budgets: {escape(fc.budget.reason)}[/]")
    console.print("intervals: low–high of the count range × the unit cost's spread (docs/config.md)")
    console.print("assumptions:")
    for a in fc.assumptions:
        console.print(escape(f"  - {a}"), highlight=False)


def plan_command(cfg: ExperimentConfig, *, config_name: str, source_run: Path | None, pilot: int,
                 prices_file: Path | None, json_out: bool) -> Forecast:
    fc = plan_forecast(cfg, source_run=source_run, pilot=pilot, prices_file=prices_file, config_name=config_name)
    if json_out:
        print(fc.model_dump_json(indent=2))
    else:
        console = Console(soft_wrap=True)
        render(fc, Console(soft_wrap=True, width=max(console.width, 150)))
    return fc


def plan_cli(config: Path, *, overrides: dict, source_run: Path | None = None, pilot: int = 0,
             prices_file: Path | None = None, json_out: bool = False) -> Forecast:
    """Load CONFIG, apply the command line's overrides, plan."""
    from ahe.config import load_experiment_config

    cfg = load_experiment_config(config)
    updates = {k: v for k, v in overrides.items() if v is not None}
    if "tasks" in updates:
        updates["tasks"] = Path(updates["tasks"]).resolve()
    if updates:
        cfg = ExperimentConfig.model_validate({**cfg.model_dump(), **updates})
    if source_run is not None and not source_run.is_dir():
        raise AheError(f"--from {source_run}: not a folder; give a run folder made by `ahe evolve`")
    return plan_command(cfg, config_name=str(config), source_run=source_run, pilot=pilot,
                        prices_file=prices_file, json_out=json_out)
