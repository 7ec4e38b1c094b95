"""`ahe simulate --suite`: every policy on every world of a scenario suite, development and
evaluation seeds apart, judged by the share of the achievable gain each policy takes home.

A suite is a folder of scenario files (`ahe/simulate/suites/<name>/*.yaml`, or any folder);
an optional `suite.yaml` there names its policies and seeds. Seeds come from two named ranges
that never overlap — `dev` (0–999: tune here) and `eval` (1000–1999: report here) — so a
policy tuned on the development seeds is reported on worlds it never saw.

Per world and policy the table holds: correct decisions and neutral kept (mean over seeds);
the share of the achievable gain H_best and the final harness capture,
Σ (true pass@1 − seed) / Σ (oracle − seed) pooled over seeds, with a 95 % bootstrap interval
over seeds; points below the oracle; rollouts and their ratio to `paper`. A summary row per
policy gives the mean over worlds and the worst world.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ahe.errors import ConfigError
from ahe.simulate.metrics import RunMetrics, interval
from ahe.simulate.scenario import Scenario, load_scenario

SUITES = Path(__file__).resolve().parent / "suites"
SEED_RANGES = {"dev": 0, "eval": 1000}  # first seed of each range; a range holds 1000 seeds
RANGE_SIZE = 1000
DEFAULT_POLICIES = ["paper", "noise", "expected-value"]


class SuiteFile(BaseModel):
    """`suite.yaml` beside the scenarios (every field optional)."""

    model_config = ConfigDict(extra="forbid")
    description: str = ""
    policies: list[str] = Field(default_factory=lambda: list(DEFAULT_POLICIES))
    seeds: int = Field(default=20, ge=1, le=RANGE_SIZE)


class Suite(BaseModel):
    name: str
    folder: Path
    description: str
    policies: list[str]
    seeds: int
    worlds: list[Scenario]


def suite_names() -> list[str]:
    return sorted(p.name for p in SUITES.iterdir() if p.is_dir()) if SUITES.is_dir() else []


def load_suite(name: str) -> Suite:
    """A built-in suite by name, or a folder of scenario files; one sentence when neither."""
    folder = SUITES / name if (SUITES / name).is_dir() else Path(name)
    if not folder.is_dir():
        raise ConfigError(f"--suite {name}: no such suite; use one of: {', '.join(suite_names())}, or a folder of scenario YAML files")
    files = sorted(p for p in folder.glob("*.yaml") if p.name != "suite.yaml")
    if not files:
        raise ConfigError(f"--suite {name}: {folder} holds no scenario files (*.yaml)")
    meta = SuiteFile()
    if (folder / "suite.yaml").exists():
        try:
            meta = SuiteFile.model_validate(yaml.safe_load((folder / "suite.yaml").read_text(encoding="utf-8")) or {})
        except (yaml.YAMLError, ValidationError) as exc:
            first = str(exc).splitlines()[0] if isinstance(exc, yaml.YAMLError) else \
                f"field `{'.'.join(str(p) for p in exc.errors()[0]['loc'])}`: {exc.errors()[0]['msg']}"
            raise ConfigError(f"--suite {name}: {folder / 'suite.yaml'}: {first}") from None
    worlds = [load_scenario(f) for f in files]
    names = [w.name for w in worlds]
    if len(set(names)) != len(names):
        raise ConfigError(f"--suite {name}: two scenario files share a name ({', '.join(sorted(n for n in names if names.count(n) > 1))})")
    return Suite(name=folder.name, folder=folder, description=meta.description, policies=meta.policies,
                 seeds=meta.seeds, worlds=worlds)


def seed_list(seed_range: str, seeds: int) -> list[int]:
    if seed_range not in SEED_RANGES:
        raise ConfigError(f"--seed-range {seed_range}: use dev (0–999, for tuning) or eval (1000–1999, for reporting)")
    if seeds > RANGE_SIZE:
        raise ConfigError(f"--seeds {seeds}: a seed range holds {RANGE_SIZE} seeds")
    first = SEED_RANGES[seed_range]
    return list(range(first, first + seeds))


def captured(ms: list[RunMetrics], attr: str, draws: int = 2000) -> tuple[float, float, float]:
    """Σ (true pass@1 − seed) / Σ (oracle − seed) over seeds, with a 95 % bootstrap interval over seeds."""
    got = np.array([getattr(m, attr) - m.seed_true for m in ms])
    room = np.array([m.oracle_true - m.seed_true for m in ms])
    if room.sum() <= 1e-12:
        return (float("nan"),) * 3  # type: ignore[return-value]
    share = float(got.sum() / room.sum())
    rng = np.random.default_rng(12345)
    idx = rng.integers(0, len(ms), size=(draws, len(ms)))
    num, den = got[idx].sum(axis=1), room[idx].sum(axis=1)
    boots = num[den > 1e-12] / den[den > 1e-12]
    lo, hi = np.percentile(boots, [2.5, 97.5]) if len(boots) else (share, share)
    return share, float(lo), float(hi)


class SuiteRow(BaseModel):
    world: str
    policy: str
    seeds: int
    accuracy: tuple[float, float, float]
    bloat: tuple[float, float, float]
    best_captured: tuple[float, float, float]
    final_captured: tuple[float, float, float]
    best_gap: tuple[float, float, float]  # points below the oracle
    final_gap: tuple[float, float, float]
    rollouts: tuple[float, float, float]
    rollouts_vs_paper: float | None = None


class SummaryRow(BaseModel):
    policy: str
    best_mean: float
    best_worst: float
    best_worst_world: str
    final_mean: float
    final_worst: float
    accuracy_mean: float
    bloat_mean: float
    bloat_worst: float
    rollouts_vs_paper_mean: float | None
    best_below_final_worlds: list[str]  # worlds where H_best captured less than the final harness
    below_paper_worlds: list[str]  # worlds where H_best is below paper's beyond the interval


def world_rows(world: str, metrics: list[RunMetrics], policies: list[str]) -> list[SuiteRow]:
    rows = []
    for p in policies:
        ms = [m for m in metrics if m.policy == p]
        if not ms:
            continue
        rows.append(SuiteRow(
            world=world, policy=p, seeds=len(ms),
            accuracy=interval([m.accuracy for m in ms if m.accuracy is not None] or [float("nan")]),
            bloat=interval([m.bloat for m in ms if m.bloat is not None] or [float("nan")]),
            best_captured=captured(ms, "best_true"), final_captured=captured(ms, "final_true"),
            best_gap=interval([100 * (m.oracle_true - m.best_true) for m in ms]),
            final_gap=interval([100 * (m.oracle_true - m.final_true) for m in ms]),
            rollouts=interval([float(m.rollouts) for m in ms])))
    paper = next((r for r in rows if r.policy == "paper"), None)
    for r in rows:
        if paper and paper.rollouts[0]:
            r.rollouts_vs_paper = r.rollouts[0] / paper.rollouts[0]
    return rows


def summarize(rows: list[SuiteRow], policies: list[str]) -> list[SummaryRow]:
    out = []
    for p in policies:
        mine = [r for r in rows if r.policy == p]
        if not mine:
            continue
        paper = {r.world: r for r in rows if r.policy == "paper"}
        worst = min(mine, key=lambda r: r.best_captured[0])
        ratios = [r.rollouts_vs_paper for r in mine if r.rollouts_vs_paper is not None]
        out.append(SummaryRow(
            policy=p,
            best_mean=float(np.mean([r.best_captured[0] for r in mine])), best_worst=worst.best_captured[0],
            best_worst_world=worst.world,
            final_mean=float(np.mean([r.final_captured[0] for r in mine])),
            final_worst=min(r.final_captured[0] for r in mine),
            accuracy_mean=float(np.nanmean([r.accuracy[0] for r in mine])),
            bloat_mean=float(np.nanmean([r.bloat[0] for r in mine])), bloat_worst=float(np.nanmax([r.bloat[0] for r in mine])),
            rollouts_vs_paper_mean=float(np.mean(ratios)) if ratios else None,
            best_below_final_worlds=[r.world for r in mine if r.best_captured[0] < r.final_captured[0] - 1e-9],
            below_paper_worlds=[r.world for r in mine if r.world in paper and r.best_captured[2] < paper[r.world].best_captured[0]]))
    return out


def _pct(x: tuple[float, float, float] | float, ci: bool = True) -> str:
    if isinstance(x, tuple):
        if x[0] != x[0]:
            return "-"
        return f"{100 * x[0]:.0f} % [{100 * x[1]:.0f}, {100 * x[2]:.0f}]" if ci else f"{100 * x[0]:.0f} %"
    return "-" if x != x else f"{100 * x:.0f} %"


def markdown(suite: Suite, rows: list[SuiteRow], summary: list[SummaryRow], seeds: list[int], seed_range: str,
             seconds: float) -> str:
    policies = [s.policy for s in summary]
    lines = [f"Suite `{suite.name}`: {len(suite.worlds)} worlds × {len(seeds)} {seed_range} seeds "
             f"({seeds[0]}–{seeds[-1]}) × {len(policies)} policies" + (f", {seconds:.0f} s." if seconds == seconds else "."), "",
             "| world | policy | correct decisions | neutral kept | H_best captures | final captures | "
             "H_best below oracle (points) | rollouts | × paper |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.world} | {r.policy} | {_pct(r.accuracy, False)} | {_pct(r.bloat, False)} | {_pct(r.best_captured)} | "
                     f"{_pct(r.final_captured)} | {r.best_gap[0]:.2f} | {r.rollouts[0]:.0f} | "
                     f"{f'{r.rollouts_vs_paper:.2f}' if r.rollouts_vs_paper else '-'} |")
    lines += ["", "| policy | H_best captures: mean over worlds | worst world | final captures: mean | worst | "
              "correct decisions | neutral kept: mean / worst | rollouts × paper | H_best < final in | below paper in |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        lines.append(f"| {s.policy} | {_pct(s.best_mean)} | {_pct(s.best_worst)} ({s.best_worst_world}) | {_pct(s.final_mean)} | "
                     f"{_pct(s.final_worst)} | {_pct(s.accuracy_mean)} | {_pct(s.bloat_mean)} / {_pct(s.bloat_worst)} | "
                     f"{f'{s.rollouts_vs_paper_mean:.2f}' if s.rollouts_vs_paper_mean else '-'} | "
                     f"{', '.join(s.best_below_final_worlds) or '-'} | {', '.join(s.below_paper_worlds) or '-'} |")
    return "\n".join(lines) + "\n"
