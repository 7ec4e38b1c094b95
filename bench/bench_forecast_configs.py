"""`ahe plan --from RUN` on other configurations (issue 37 item 3; docs/benchmarks.md §14).

Four configuration families on the scripted MOCK demo — best-of-n (`variants: 2`), the
expected-value attribution policy, the mini-swe-agent backend, a holdout split
(`holdout: {share: 0.34}`). Each family has one *fit* run (2 iterations, k=1) under
`OUT/fit/` and five *check* runs under `OUT/check/` varying k (1–3) and iterations (2–3);
every check run is forecast from its own family's fit run before it runs, never from itself.

    .venv/bin/python bench/bench_forecast_configs.py [--out DIR] [--families a,b] [--checks N] [--reuse]

(`--families best-of-n --checks 1 --reuse` over run folders already in DIR is the smoke test's
tiny mode: tests/test_bench_smoke.py.)
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_forecast import _run  # noqa: E402

from ahe.config import load_experiment_config  # noqa: E402
from ahe.demo import write_demo  # noqa: E402
from ahe.evolution.plan_command import plan_forecast  # noqa: E402
from ahe.run_folder import RunFolder  # noqa: E402

FAMILIES = {  # name: (write_demo keywords, config keys set after)
    "mini-swe-agent": ({"backend": "mini-swe-agent"}, {}),
    "best-of-n": ({"variants": 2}, {}),
    "expected-value": ({}, {"attribution": {"strictness": "expected-value"}}),
    "holdout": ({}, {"holdout": {"share": 0.34}}),
}
FIT = (2, 1)
CHECKS = [(2, 2), (2, 3), (3, 1), (3, 2), (3, 3)]  # (iterations, k)


def _make(directory: Path, family: str, iterations: int, k: int) -> Path:
    kwargs, extra = FAMILIES[family]
    config = write_demo(directory, iterations=iterations, k=k, **kwargs)
    cfg = yaml.safe_load(config.read_text())
    cfg.update(extra)
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return config


def _check(family: str, fit: Path, config: Path, reuse: bool) -> dict:
    plan = plan_forecast(load_experiment_config(config), source_run=fit)  # before the run
    t = time.monotonic()
    run = _run(config, reuse)
    secs = time.monotonic() - t
    tokens = RunFolder(run).load_scores().totals()["tokens"]
    actual = tokens["total"]
    roles = {r.role: f"{100 * (r.total_tokens.mid - tokens.get(r.role, 0)) / max(tokens.get(r.role, 0), 1):+.0f} %"
             for r in plan.roles}  # each role's forecast error: where a miss comes from
    iv = plan.total_tokens
    cfg = yaml.safe_load(config.read_text())
    return {"family": family, "iterations": cfg["iterations"], "k": cfg["k"], "forecast": round(iv.mid),
            "low": round(iv.low), "high": round(iv.high), "actual": actual, "error": (iv.mid - actual) / actual,
            "within25": abs(iv.mid - actual) <= 0.25 * actual, "covered": iv.low <= actual <= iv.high,
            "run_s": round(secs, 1), "role_errors": roles}


def _table(rows: list[dict]) -> str:
    lines = ["| family | iterations | k | forecast | interval | actual | error | ±25 % | covered |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['family']} | {r['iterations']} | {r['k']} | {r['forecast']:,} | {r['low']:,}–{r['high']:,} | "
                     f"{r['actual']:,} | {100 * r['error']:+.0f} % | {'yes' if r['within25'] else '**no**'} | "
                     f"{'yes' if r['covered'] else '**no**'} |")
    n = len(rows)
    within, covered = sum(r["within25"] for r in rows), sum(r["covered"] for r in rows)
    for r in rows:
        if not (r["within25"] and r["covered"]):
            lines.append(f"\nmiss: {r['family']} {r['iterations']} iterations k={r['k']}, error by role: {r['role_errors']}")
    lines.append(f"\n{n} check runs: forecast within ±25 % for {within}/{n} ({100 * within / max(n, 1):.0f} %), "
                 f"interval covers the actual for {covered}/{n} ({100 * covered / max(n, 1):.0f} %)")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--checks", type=int, default=len(CHECKS), help="the first N check runs of each family")
    ap.add_argument("--reuse", action="store_true", help="keep run folders already in --out (plans are made again)")
    args = ap.parse_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="ahe-forecast-configs-"))
    rows: list[dict] = []
    t0 = time.monotonic()
    for family in args.families.split(","):
        t = time.monotonic()
        fit = _run(_make(root / "fit" / family, family, *FIT), args.reuse)
        print(json.dumps({"family": family, "fit": str(fit), "run_s": round(time.monotonic() - t, 1)}), flush=True)
        for c, (iterations, k) in enumerate(CHECKS[: args.checks]):
            rows.append(_check(family, fit, _make(root / "check" / f"{family}-{c}", family, iterations, k), args.reuse))
            print(json.dumps(rows[-1]), flush=True)
    table = _table(rows) + f"; {time.monotonic() - t0:.0f} s; run folders in {root}"
    (root / "table.md").write_text(table + "\n")
    print("\n" + table)


if __name__ == "__main__":
    main()
