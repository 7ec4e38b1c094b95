"""How well `ahe plan --from RUN` forecasts a run's tokens (issue 37; docs/benchmarks.md).

Five groups, one per agent policy length (the scripted MOCK agent of the demo, padded with
L extra shell turns that print P characters each, so trials cost more or fewer tokens). In each
group one *fit* run (2 iterations, k=1, paper policy) is the source of unit costs; the *check*
runs vary k, iterations and the attribution policy (expected-value re-evaluates) and are never
used to fit. For each check run: the forecast of total tokens from the group's fit run against
what the run recorded (scores.json), and whether the stated interval covers it.

    .venv/bin/python bench/bench_forecast.py [--out DIR] [--groups N] [--checks N] [--reuse]

(`--groups 1 --checks 1 --reuse` over run folders already in DIR is the smoke test's tiny mode:
tests/test_bench_smoke.py.)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ahe.config import load_experiment_config  # noqa: E402
from ahe.demo import write_demo  # noqa: E402
from ahe.evolution.commands import evolve_command  # noqa: E402
from ahe.evolution.plan_command import plan_forecast  # noqa: E402
from ahe.run_folder import RunFolder  # noqa: E402

POLICIES = [(0, 0), (2, 300), (4, 800), (6, 1500), (9, 2500)]  # (extra turns, characters printed per turn)
CHECKS = [  # (iterations, k, strictness)
    (3, 2, "paper"), (2, 3, "paper"), (3, 1, "expected-value"), (4, 2, "paper"), (2, 2, "expected-value"),
]
FIT = (2, 1, "paper")


def _pad(policy: Path, turns: int, chars: int) -> None:
    pol = yaml.safe_load(policy.read_text())
    if turns:
        wrap = pol["rules"].pop()  # "wrap up" at turn ≥ 2
        extra = [{"name": f"pad {t}", "match": {"turn": t},
                  "tool_calls": [{"name": "run_shell_command", "arguments": {"command": f"python3 -c \"print('x' * {chars})\""}}]}
                 for t in range(2, turns + 2)]
        wrap["match"] = {"turn_min": turns + 2}
        pol["rules"] += extra + [wrap]
    policy.write_text(yaml.safe_dump(pol, sort_keys=False, width=200))


def _make(root: Path, name: str, spec: tuple[int, int, str], pad: tuple[int, int]) -> Path:
    iterations, k, strictness = spec
    config = write_demo(root / name, iterations=iterations, k=k)
    _pad(root / name / "policies" / "agent.yaml", *pad)
    cfg = yaml.safe_load(config.read_text())
    cfg["attribution"] = {"strictness": strictness}
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return config


def _run(config: Path, reuse: bool = False) -> Path:
    if reuse and (config.parent / "run" / "scores.json").exists():
        return config.parent / "run"
    return evolve_command(config, resume=None, run_dir=config.parent / "run", overrides={}, quiet=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--groups", type=int, default=len(POLICIES))
    ap.add_argument("--checks", type=int, default=len(CHECKS), help="the first N check runs of each group")
    ap.add_argument("--reuse", action="store_true", help="keep run folders already in --out (plans are made again)")
    args = ap.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="ahe-forecast-"))
    rows, fits, checks = [], [], []
    t0 = time.monotonic()
    for g, pad in enumerate(POLICIES[: args.groups]):
        fit = _run(_make(root, f"g{g}-fit", FIT, pad), args.reuse)
        fits.append(fit)
        for c, spec in enumerate(CHECKS[: args.checks]):
            config = _make(root, f"g{g}-check{c}", spec, pad)
            plan = plan_forecast(load_experiment_config(config), source_run=fit)  # before the run
            run = _run(config, args.reuse)
            actual = RunFolder(run).load_scores().totals()["tokens"]["total"]
            checks.append((g, config, actual))
            iv = plan.total_tokens
            secs = RunFolder(run).load_state().elapsed_sec
            hv = plan.hours
            rows.append({"group": g, "pad": pad, "iterations": spec[0], "k": spec[1], "policy": spec[2],
                         "forecast": round(iv.mid), "low": round(iv.low), "high": round(iv.high), "actual": actual,
                         "error": (iv.mid - actual) / actual, "within25": abs(iv.mid - actual) <= 0.25 * actual,
                         "covered": iv.low <= actual <= iv.high,
                         "wall_forecast_s": round(hv.mid * 3600, 1), "wall_actual_s": round(secs, 1),
                         "wall_covered": hv.low * 3600 <= secs <= hv.high * 3600})
            print(json.dumps(rows[-1]), flush=True)
    n = len(rows)
    within = sum(r["within25"] for r in rows)
    covered = sum(r["covered"] for r in rows)
    wall = sum(r["wall_covered"] for r in rows)
    print(f"\n| group (turns, chars) | iterations | k | policy | forecast | interval | actual | error | ±25% | covered | wall s forecast / actual |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['group']} {tuple(r['pad'])} | {r['iterations']} | {r['k']} | {r['policy']} | {r['forecast']:,} | "
              f"{r['low']:,}–{r['high']:,} | {r['actual']:,} | {100 * r['error']:+.0f}% | {'yes' if r['within25'] else 'no'} | "
              f"{'yes' if r['covered'] else 'no'} | {r['wall_forecast_s']} / {r['wall_actual_s']} |")
    print(f"\n{n} check runs: forecast within ±25% for {within}/{n} ({100 * within / n:.0f}%), interval covers the actual "
          f"for {covered}/{n} ({100 * covered / n:.0f}%); wall-clock interval covers {wall}/{n}; {time.monotonic() - t0:.0f} s; run folders in {root}")


    _mismatched(fits, checks)


def _mismatched(fits: list[Path], checks: list[tuple[int, Path, int]]) -> None:
    """The same check runs forecast from another group's fit run: a source of a different harness."""
    n = within = covered = 0
    for g, config, actual in checks:
        for h, fit in enumerate(fits):
            if h == g:
                continue
            iv = plan_forecast(load_experiment_config(config), source_run=fit).total_tokens
            n += 1
            within += abs(iv.mid - actual) <= 0.25 * actual
            covered += iv.low <= actual <= iv.high
    if n:
        print(f"mismatched source (another policy length's fit run), {n} forecasts: within ±25% {within}/{n} "
              f"({100 * within / n:.0f}%), covered {covered}/{n} ({100 * covered / n:.0f}%)")


if __name__ == "__main__":
    main()
