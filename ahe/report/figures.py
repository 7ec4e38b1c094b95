"""The paper's figures as data, from a run folder: for `ahe audit` (tables, --json) and `ahe report` (SVG).

- pass@1 by difficulty (easy/medium/hard from task.toml's [metadata]) per iteration;
- Succ/Mtok and tokens per trial per iteration (infra-aborted trials left out of tokens,
  `ahe.report.efficiency`);
- the per-round self-attribution: for fix and for regression predictions, true positives
  (predicted and happened), false positives (predicted, did not happen) and misses (happened,
  not predicted), with that round's pass@1;
- calibration across iterations: the mean of the per-iteration precision/recall (each round
  weighs the same) beside the pooled one (every prediction weighs the same) and the random
  baseline of each.

Everything is read tolerantly: a missing or half-written file leaves its entry out.
"""

from __future__ import annotations

from pathlib import Path
from statistics import mean
from typing import Any

from ahe.report.efficiency import side_metrics, task_difficulty
from ahe.report.pooling import pooled as pool
from ahe.run_folder import RunFolder

KINDS = ("fix_predictions", "regression_predictions")


def _difficulties(run: RunFolder) -> dict[str, str]:
    try:
        import yaml

        exp = yaml.safe_load(run.experiment_yaml.read_text(encoding="utf-8")) or {}
    except Exception:  # noqa: BLE001 - no config: every task is "unknown"
        return {}
    tasks = exp.get("tasks") if isinstance(exp, dict) else None
    folders = [Path(tasks)] if isinstance(tasks, str) else []
    if run.tasks_source.is_dir():  # what a task source produced for this run (SOURCE:ARG)
        folders += sorted(p for p in run.tasks_source.iterdir() if p.is_dir())
    folder = next((f for f in folders if f.is_dir()), None)
    return task_difficulty(folder, exp.get("include") or None) if folder else {}


def per_iteration(run: RunFolder, its: list[int], difficulty: dict[str, str]) -> list[dict]:
    """pass@1 overall and by difficulty, tokens per trial and Succ/Mtok, per evaluated iteration."""
    rows = []
    for it in its:
        trials = run.iteration(it).trial_results()
        if not trials:
            continue
        m = side_metrics(trials, difficulty)
        rows.append({"iteration": it, "pass_at_1": m["pass_at_1"], "trials": m["trials"], "infra_errors": m["infra_errors"],
                     "tokens_per_trial": m["tokens_per_trial"], "successes_per_mtok": m["successes_per_mtok"],
                     "by_difficulty": {d: {k: b[k] for k in ("pass_at_1", "trials", "tokens_per_trial", "successes_per_mtok")}
                                       for d, b in m["by_difficulty"].items()}})
    return rows


def self_attribution(run: RunFolder, its: list[int], pass_at_1: dict[int, float | None]) -> list[dict]:
    """Per judging round t (attribution of iteration t−1's changes): TP / FP / misses per kind."""
    rounds = []
    for it in its:
        att = run.iteration(it).attribution()
        if att is None or not att.changes:
            continue
        row: dict[str, Any] = {"iteration": it, "changes_of": it - 1, "pass_at_1": pass_at_1.get(it), "n_tasks": att.n_tasks}
        for kind in KINDS:
            p = getattr(att, kind)
            hits = len(p.hits)
            row[kind] = {"true_positives": hits, "false_positives": len(p.predicted) - hits, "misses": len(p.actual) - hits,
                         "precision": p.precision, "recall": p.recall,
                         "random_precision": p.random_precision, "random_recall": p.random_recall}
        rounds.append(row)
    return rounds


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return mean(vals) if vals else None


def calibration(rounds: list[dict], pooled: dict[str, dict] | None) -> dict[str, dict]:
    """Mean over rounds (macro) beside pooled (micro) and random, for fixes and regressions."""
    out = {}
    for kind in KINDS:
        blocks = [r[kind] for r in rounds]
        pool = (pooled or {}).get(kind) or {}
        out[kind] = {
            "rounds": len(blocks),
            "mean_precision": _mean([b["precision"] for b in blocks]),
            "mean_recall": _mean([b["recall"] for b in blocks]),
            "mean_random_precision": _mean([b["random_precision"] for b in blocks]),
            "mean_random_recall": _mean([b["random_recall"] for b in blocks]),
            "pooled_precision": pool.get("precision"), "pooled_recall": pool.get("recall"),
            "pooled_random_precision": pool.get("random_precision"), "pooled_random_recall": pool.get("random_recall"),
        }
    return out


def build_figures(run_dir: Path | RunFolder, pooled: dict[str, dict] | None = None) -> dict:
    """All four figures' data. `pooled` is the audit's pooled precision/recall (computed there)."""
    run = run_dir if isinstance(run_dir, RunFolder) else RunFolder(Path(run_dir))
    its = run.iterations()
    rows = per_iteration(run, its, _difficulties(run))
    p1 = {r["iteration"]: r["pass_at_1"] for r in rows}
    rounds = self_attribution(run, its, p1)
    if pooled is None:
        atts = [run.iteration(r["iteration"]).attribution() for r in rounds]
        pooled = {k: pool([getattr(a, k).model_dump() for a in atts if a], [a.n_tasks for a in atts if a]) for k in KINDS}
    diffs: list[str] = []
    for r in rows:
        diffs += [d for d in r["by_difficulty"] if d not in diffs]
    return {"difficulties": diffs, "per_iteration": rows, "self_attribution": rounds,
            "calibration": calibration(rounds, pooled)}


def render_figures(fig: dict, console: Any) -> None:
    """The audit's tables of the figures."""
    from rich.table import Table

    def f(x: float | None, fmt: str = ".3f") -> str:
        return "n/a" if x is None else format(x, fmt)

    t = Table(title="pass@1 by difficulty, tokens and Succ/Mtok per iteration")
    for c in ("iteration", "pass@1", *fig["difficulties"], "tokens/trial", "succ./Mtok"):
        t.add_column(c, justify="right")
    for r in fig["per_iteration"]:
        by = r["by_difficulty"]
        t.add_row(str(r["iteration"]), f(r["pass_at_1"]), *[f(by[d]["pass_at_1"]) if d in by else "-" for d in fig["difficulties"]],
                  f(r["tokens_per_trial"], ".0f"), f(r["successes_per_mtok"], ".1f"))
    console.print(t)
    if fig["self_attribution"]:
        t = Table(title="Self-attribution per round (changes of iteration t−1 judged in iteration t)")
        for c in ("round", "pass@1", "fix TP", "fix FP", "fix misses", "regr. TP", "regr. FP", "regr. misses"):
            t.add_column(c, justify="right")
        for r in fig["self_attribution"]:
            fx, rg = r["fix_predictions"], r["regression_predictions"]
            t.add_row(str(r["iteration"]), f(r["pass_at_1"]), str(fx["true_positives"]), str(fx["false_positives"]),
                      str(fx["misses"]), str(rg["true_positives"]), str(rg["false_positives"]), str(rg["misses"]))
        console.print(t)
    t = Table(title="Calibration across iterations: mean of rounds vs pooled vs random")
    for c in ("predictions", "rounds", "mean precision", "pooled precision", "random (mean)", "mean recall",
              "pooled recall", "random (mean) "):
        t.add_column(c, justify="left" if c == "predictions" else "right")
    for kind, name in zip(KINDS, ("fix", "regression")):
        c = fig["calibration"][kind]
        t.add_row(name, str(c["rounds"]), f(c["mean_precision"], ".2f"), f(c["pooled_precision"], ".2f"),
                  f(c["mean_random_precision"], ".2f"), f(c["mean_recall"], ".2f"), f(c["pooled_recall"], ".2f"),
                  f(c["mean_random_recall"], ".2f"))
    console.print(t)
