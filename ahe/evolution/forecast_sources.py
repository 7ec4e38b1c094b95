"""Unit costs for the forecast (ahe.evolution.forecast): from a previous run, or the stated defaults.

From a run folder: every trial's result.json (rollouts, re-evaluation, variants) gives tokens per
trial split into input, cached and output, and its seconds; scores.json gives the debugger's,
evolve's and explore's tokens per iteration and each phase's wall time; the evolve manifests
give the evolve sessions' split. The spread of the interval is the variation between the run's
rounds (per-iteration means), never narrower than RUN_SPREAD_FLOOR.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from ahe.errors import AheError
from ahe.evolution.forecast import DEFAULT_SPREAD, RUN_SPREAD_FLOOR, UnitCost, UnitCosts
from ahe.run_folder import RunFolder

# stated defaults per task kind: tokens of one trial (input, cached, output) and its seconds, plus the
# other roles' units; orders of magnitude from the paper's TB2 runs, hence the factor-of-three interval
DEFAULTS: dict[str, dict[str, UnitCost]] = {
    "one-shot": {
        "agent": UnitCost(input=400_000, cached=300_000, output=12_000, seconds=420),
        "debugger": UnitCost(input=30_000, cached=10_000, output=3_000, seconds=60),
        "evolve": UnitCost(input=1_500_000, cached=1_100_000, output=40_000, seconds=1800),
        "explore": UnitCost(input=500_000, cached=300_000, output=15_000, seconds=900),
    },
    "ci": {
        "agent": UnitCost(input=1_500_000, cached=1_100_000, output=40_000, seconds=1800),
        "debugger": UnitCost(input=60_000, cached=20_000, output=5_000, seconds=90),
        "evolve": UnitCost(input=1_500_000, cached=1_100_000, output=40_000, seconds=1800),
        "explore": UnitCost(input=500_000, cached=300_000, output=15_000, seconds=900),
    },
}


def default_costs(kind: str) -> UnitCosts:
    d = DEFAULTS[kind]
    return UnitCosts(source="defaults", detail=f"stated defaults for {kind} tasks (no --from run, no --pilot)",
                     agent=d["agent"], debugger=d["debugger"], evolve=d["evolve"], explore=d["explore"],
                     assumptions=[f"unit costs are AHE's defaults for {kind} tasks, not measured: the interval is a "
                                  f"factor of {math.exp(DEFAULT_SPREAD):.0f} either way; use --from RUN or --pilot N to measure"])


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _spread(values: list[float]) -> float:
    """Log half-width from the variation of per-round values (2 standard deviations), at least the floor."""
    vals = [v for v in values if v > 0]
    if len(vals) < 2:
        return max(RUN_SPREAD_FLOOR, 0.35)
    logs = [math.log(v) for v in vals]
    return max(RUN_SPREAD_FLOOR, 2 * statistics.pstdev(logs))


def _trials(run: Path) -> tuple[list[dict], dict[str, list[float]]]:
    """All trial results of the run, and the per-iteration tokens per trial."""
    rows: list[dict] = []
    per_iter: dict[str, list[float]] = {}
    for path in sorted(run.glob("iterations/*/**/trial-*/result.json")):
        r = _read(path)
        u = r.get("usage") or {}
        if not u and not r:
            continue
        rows.append(r)
        it = path.relative_to(run / "iterations").parts[0]
        per_iter.setdefault(it, []).append(float(u.get("prompt_tokens", 0)) + float(u.get("completion_tokens", 0)))
    return rows, per_iter


def _agent(rows: list[dict], per_iter: dict[str, list[float]]) -> UnitCost:
    n = len(rows)
    usage = [r.get("usage") or {} for r in rows]
    return UnitCost(
        input=sum(u.get("prompt_tokens", 0) for u in usage) / n,
        cached=sum(u.get("cached_tokens", 0) for u in usage) / n,
        output=sum(u.get("completion_tokens", 0) for u in usage) / n,
        seconds=sum(float(r.get("duration_sec") or 0) for r in rows) / n,
        spread=_spread([statistics.fmean(v) for v in per_iter.values() if v]),
    )


def _role(per_iteration: list[float], units: list[float], seconds: list[float], split: tuple[float, float]) -> UnitCost:
    """A role's unit from per-iteration tokens and units (tasks or sessions); split = (cached share of input, output share)."""
    pairs = [(t, u) for t, u in zip(per_iteration, units) if u > 0]
    total_units = sum(u for _, u in pairs)
    if not total_units:
        return UnitCost(spread=RUN_SPREAD_FLOOR)
    tokens = sum(t for t, _ in pairs) / total_units
    out = tokens * split[1]
    return UnitCost(input=tokens - out, cached=(tokens - out) * split[0], output=out,
                    seconds=sum(seconds) / total_units, spread=_spread([t / u for t, u in pairs]))


def _manifest_split(run: Path) -> tuple[float, float]:
    prompt = cached = completion = 0.0
    for path in run.glob("iterations/*/evolve/manifest.json"):
        u = _read(path).get("usage") or {}
        prompt += u.get("prompt_tokens", 0)
        cached += u.get("cached_tokens", 0)
        completion += u.get("completion_tokens", 0)
    if prompt + completion <= 0:
        return 0.0, 0.05
    return (cached / prompt if prompt else 0.0), completion / (prompt + completion)


def run_costs(run: Path) -> UnitCosts:
    """Unit costs measured on a run folder made by `ahe evolve`."""
    import yaml

    scores = _read(run / "scores.json")
    if not scores.get("iterations"):
        raise AheError(f"--from {run}: no scores.json with iterations there; is it a run folder made by `ahe evolve`?")
    rows, per_iter = _trials(run)
    if not rows:
        raise AheError(f"--from {run}: no trial results under iterations/; the run has not evaluated anything yet")
    exp = yaml.safe_load((run / "experiment.yaml").read_text()) if (run / "experiment.yaml").exists() else {}
    iters = scores["iterations"]
    n_tasks = max(len({p.parent.name for p in run.glob("iterations/001/rollouts/*/trial-*")}), 1)
    k = int(exp.get("k") or iters[0].get("k") or 1)
    variants = int(exp.get("variants") or 1)
    split = _manifest_split(run)
    work = [s for s in iters if not s.get("final")]
    debugger = _role([s["tokens"].get("debugger", 0) for s in work], [n_tasks if "debug" in s.get("timings_sec", {}) else 0 for s in work],
                     [s.get("timings_sec", {}).get("debug", 0) for s in work], (0.3, 0.1))
    folder = RunFolder(run)

    def sessions(it: int) -> int:  # a tree round's evolve calls are its children's folders; else the variants
        return folder.iteration(it).tree_evolve_calls() if exp.get("search") == "tree" else variants

    evolve = _role([s["tokens"].get("evolve", 0) for s in work],
                   [sessions(s["iteration"]) if "evolve" in s.get("timings_sec", {}) else 0 for s in work],
                   [s.get("timings_sec", {}).get("evolve", 0) for s in work], split)
    explore = _role([s["tokens"].get("explore", 0) for s in work], [1 if s["tokens"].get("explore") else 0 for s in work],
                    [s.get("timings_sec", {}).get("explore", 0) for s in work], split)
    attributed = [s for s in iters if s["iteration"] >= 2]
    reeval = (sum(s.get("reeval_trials", 0) for s in attributed) / (len(attributed) * n_tasks * k)) if attributed else None
    rollout_trials = sum(s.get("n_trials", 0) for s in iters)
    rollout_sec = sum(s.get("timings_sec", {}).get("rollout", 0) for s in iters)
    conc = int(exp.get("concurrency") or 1)
    wall = rollout_sec * min(conc, n_tasks * k) / rollout_trials if rollout_trials else None
    detail = f"{run}: {len(rows)} trials over {len(iters)} rounds, {n_tasks} tasks, k={k}"
    return UnitCosts(source="run", detail=detail, agent=_agent(rows, per_iter), debugger=debugger, evolve=evolve,
                     explore=explore, reeval_per_round=reeval, trial_wall_sec=wall,
                     assumptions=[f"unit costs measured on {run} (same tasks and harness assumed)",
                                  "debugger tokens split 70/30 cached and 90/10 input/output (scores.json keeps totals only)"])
