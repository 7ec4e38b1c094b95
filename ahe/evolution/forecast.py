"""What a run will cost before it starts (`ahe plan`, `ahe evolve --plan`; docs/cli.md).

The forecast multiplies two things. *Counts* follow the loop's own rules (ahe.evolution.loop):
every iteration evaluates the current harness on tasks × k trials, the final harness once more
when `evaluate_final`; from iteration 2 on, attribution may re-evaluate (noise, expected-value:
up to `reeval_share` × tasks × k trials, expected-value up to `reeval_ceiling` times that); every
non-final iteration runs the debugger on the tasks and `variants` evolve sessions, and with
variants ≥ 2 evaluates each variant on tasks × k trials; iteration 1 runs the explore agent when
it has sources. *Unit costs* (tokens of one trial, of the debugger per task, of one evolve or
explore session, and their seconds) come from a previous run (`--from RUN`), a pilot, or the
stated defaults per task kind. Each number carries an interval: the count's range times the
unit cost's range (docs/config.md: what the interval means).
"""

from __future__ import annotations

import fnmatch
import math
from pathlib import Path

from pydantic import BaseModel, Field

from ahe.config import ExperimentConfig
from ahe.errors import AheError
from ahe.llm.types import Price

REEVAL_POLICIES = ("noise", "expected-value")
# expected-value spends about 0.45 of a round per attribution over the simulator's standard suite
# (docs/decisions.md: 1.45x the paper's rollouts); noise spends most of its budget
EV_REEVAL_MID = 0.45
# the narrowest relative half-width (in log units) an interval from a previous run gets; set before
# bench/bench_forecast.py's check runs were made and not tuned on them (docs/benchmarks.md)
RUN_SPREAD_FLOOR = 0.2
DEFAULT_SPREAD = math.log(3.0)  # defaults: a factor of three either way


class Interval(BaseModel):
    low: float
    mid: float
    high: float

    @classmethod
    def of(cls, mid: float, spread: float = 0.0, low: float | None = None, high: float | None = None) -> "Interval":
        return cls(low=mid * math.exp(-spread) if low is None else low, mid=mid,
                   high=mid * math.exp(spread) if high is None else high)

    def times(self, other: "Interval") -> "Interval":
        return Interval(low=self.low * other.low, mid=self.mid * other.mid, high=self.high * other.high)

    def plus(self, other: "Interval") -> "Interval":
        return Interval(low=self.low + other.low, mid=self.mid + other.mid, high=self.high + other.high)

    def scale(self, x: float) -> "Interval":
        return Interval(low=self.low * x, mid=self.mid * x, high=self.high * x)


ZERO = Interval(low=0, mid=0, high=0)


class UnitCost(BaseModel):
    """One unit of a role's work: tokens (input, of which cached, output) and seconds."""

    input: float = 0.0
    cached: float = 0.0
    output: float = 0.0
    seconds: float = 0.0
    spread: float = DEFAULT_SPREAD  # relative half-width of the interval, log units

    @property
    def tokens(self) -> float:
        return self.input + self.output


class UnitCosts(BaseModel):
    """What each unit costs; `per` names the unit of each role."""

    source: str  # run, pilot or defaults
    detail: str
    agent: UnitCost  # one trial
    debugger: UnitCost  # one task in one debug phase
    evolve: UnitCost  # one evolve session
    explore: UnitCost  # one explore session
    reeval_per_round: float | None = None  # re-evaluation trials per attribution, as a share of tasks × k (observed)
    trial_wall_sec: float | None = None  # rollout wall time × concurrency / trials (observed)
    assumptions: list[str] = Field(default_factory=list)


class TrialCount(BaseModel):
    rounds: int  # rollouts of the loop: iterations (+1 for the final evaluation)
    tasks: int
    k: int
    rollout: int  # tasks × k × rounds
    variants: int  # variant evaluations
    reeval: Interval  # re-evaluation trials
    holdout: int = 0  # the held-out scoring of seed and best (holdout:)
    total: Interval


class RoleForecast(BaseModel):
    role: str
    model: str | None
    units: Interval  # trials or sessions or task-phases
    input_tokens: Interval
    cached_tokens: Interval
    output_tokens: Interval
    total_tokens: Interval
    cost_usd: Interval | None  # None: no price for this model (never priced at zero)
    price: str  # the price used, or "no price"


class BudgetVerdict(BaseModel):
    stops: bool
    iteration: int | None = None
    phase: str | None = None
    reason: str
    may_stop: bool = False  # the interval's high end reaches a budget the middle does not


class Forecast(BaseModel):
    config: str
    source: str
    source_detail: str
    executor: str
    concurrency: int
    trials: TrialCount
    roles: list[RoleForecast]
    total_tokens: Interval
    cost_usd: Interval | None  # priced roles only; None when no role has a price
    unpriced_roles: list[str]
    hours: Interval
    budget: BudgetVerdict
    assumptions: list[str]
    pilot_cost: dict[str, float | None] | None = None  # a pilot's own spend: trials, tokens, seconds, cost_usd (None: no price)


# ---------------------------------------------------------------------------- tasks
def count_tasks(cfg: ExperimentConfig) -> tuple[int, str]:
    """(tasks the run will use, their kind: one-shot or ci), read without loading them."""
    root = Path(cfg.tasks)
    if not root.is_dir():
        raise AheError(f"tasks: {root} is not a folder; `ahe plan` needs the task folders (each with a task.toml)")
    names = sorted(p.parent.name for p in root.glob("*/task.toml"))
    if cfg.include:
        names = [n for n in names if any(fnmatch.fnmatch(n, pat) for pat in cfg.include)]
    if not names:
        raise AheError(f"tasks: no task folders (with a task.toml) in {root}" + (" match include" if cfg.include else ""))
    ci = sum(1 for n in names if "[ci]" in (root / n / "task.toml").read_text(errors="replace"))
    return len(names), "ci" if ci * 2 > len(names) else "one-shot"


# ---------------------------------------------------------------------------- counts
def reeval_range(cfg: ExperimentConfig, tasks: int, observed: float | None) -> Interval:
    """Re-evaluation trials of one attribution round, as the policy's budget allows."""
    a = cfg.attribution
    share = a.reeval_share * tasks * cfg.k
    if a.strictness == "noise":
        return Interval(low=0, mid=int(share) if observed is None else min(int(share), observed * tasks * cfg.k), high=int(share))
    if a.strictness == "expected-value":
        high = float(round(a.reeval_ceiling * share))
        mid = EV_REEVAL_MID * tasks * cfg.k if observed is None else observed * tasks * cfg.k
        return Interval(low=0, mid=min(mid, high), high=high)
    return ZERO


def children(cfg: ExperimentConfig) -> tuple[int, Interval, Interval]:
    """Per non-final iteration: evolve sessions and child evaluations (each tasks × k trials), and
    the evaluations after the loop. line: 1, none; best-of-n: N, N; tree (docs/search.md): width
    calls, 0 to width children plus the merge (mid: width — a call may propose nothing, a merge
    needs a pair of different files), then the finalists re-evaluated (none when a budget ends it)."""
    if cfg.search == "tree":
        t = cfg.tree
        return t.width, Interval(low=0, mid=t.width, high=t.width + (1 if t.merge else 0)), Interval(low=0, mid=t.finalists, high=t.finalists)
    if cfg.variants > 1:
        n = float(cfg.variants)
        return cfg.variants, Interval(low=n, mid=n, high=n), ZERO
    return 1, ZERO, ZERO


def count_trials(cfg: ExperimentConfig, tasks: int, observed_reeval: float | None = None) -> TrialCount:
    """`tasks`: every task of the run; with `holdout:` the rounds run the search split only and the
    held-out scoring adds its trials (ahe.evolution.holdout)."""
    from ahe.evolution.holdout import held_out_trials, search_tasks

    held, tasks = held_out_trials(cfg, tasks), search_tasks(cfg, tasks)
    rounds = cfg.iterations + (1 if cfg.evaluate_final else 0)
    per = tasks * cfg.k
    _, child, after = children(cfg)
    extra = child.scale(cfg.iterations * per).plus(after.scale(per))  # children, merges and the tree's finalists
    reeval = reeval_range(cfg, tasks, observed_reeval).scale(rounds - 1)
    base = float(rounds * per + held)
    return TrialCount(rounds=rounds, tasks=tasks, k=cfg.k, rollout=rounds * per, variants=round(extra.mid), reeval=reeval,
                      holdout=held, total=reeval.plus(extra).plus(Interval(low=base, mid=base, high=base)))


def phase_plan(cfg: ExperimentConfig, tasks: int, observed_reeval: float | None) -> list[tuple[int, str, dict[str, Interval]]]:
    """The loop's phases in order, with the units of each role each phase spends (`tasks`: all of them)."""
    from ahe.evolution.holdout import held_out_trials, search_tasks

    held, tasks = float(held_out_trials(cfg, tasks)), search_tasks(cfg, tasks)
    per = float(tasks * cfg.k)
    one = Interval(low=1, mid=1, high=1)
    sessions, child, after = children(cfg)
    out: list[tuple[int, str, dict[str, Interval]]] = []
    for it in range(1, cfg.iterations + (2 if cfg.evaluate_final else 1)):
        final = it > cfg.iterations
        out.append((it, "rollout", {"agent": Interval(low=per, mid=per, high=per)}))
        if it >= 2:
            attribution = {"reeval": reeval_range(cfg, tasks, observed_reeval)}
            if it == cfg.iterations + (1 if cfg.evaluate_final else 0) and after.high > 0:
                attribution["agent"] = after.scale(per)  # the tree's finalists, re-evaluated after the last round
            out.append((it, "attribution", attribution))
        if final:
            break
        if cfg.debugger.enabled and cfg.debugger.use_agent:
            out.append((it, "debug", {"debugger": one.scale(tasks)}))
        if it == 1 and cfg.explore.sources:
            out.append((it, "explore", {"explore": one}))
        evolve = {"evolve": one.scale(sessions)}
        if child.high > 0:
            evolve["agent"] = child.scale(per)
        out.append((it, "evolve", evolve))
    if held:  # after the loop: seed and best on the sealed held-out split (marked done as iteration 0's "holdout")
        out.append((0, "holdout", {"agent": Interval(low=held, mid=held, high=held)}))
    return out
