"""The report's "splits" section: a run that evolved on one side of a SWE-Playground
held-out split (`ahe tasks derive --holdout`), and the check of its harness on the other.

The evolve split comes from the run itself (pass@1 of the seed in iteration 1, and of the
best harness). The held-out split comes from an `ahe transfer` of the run's best harness
against its seed on the held-out folder, written into the run (`RUN/holdout/transfer.json`,
or `RUN/transfer.json`); until then the row says which command fills it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ahe.run_folder import RunFolder, Scores

SPLITS = ("train", "holdout")


def _json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _tasks_dir(run: RunFolder) -> Path | None:
    """The folder the run evolved on, from experiment.yaml (a folder or a playground: source)."""
    try:
        import yaml

        tasks = str((yaml.safe_load(run.experiment_yaml.read_text(encoding="utf-8")) or {}).get("tasks") or "")
    except Exception:  # noqa: BLE001 - no or half-written experiment.yaml: no splits section
        return None
    if tasks.startswith("playground:"):
        split = "holdout" if "split=holdout" in tasks else "train"
        return run.tasks_source / "playground" / split
    return Path(tasks) if tasks else None


def _held_out_row(run: RunFolder, holdout_dir: Path) -> dict[str, Any] | None:
    """The transfer row whose task folder is the held-out split, with the commits compared."""
    for path in (run.root / "holdout" / "transfer.json", run.root / "transfer.json"):
        data = _json(path)
        if not isinstance(data, dict):
            continue
        folders = [Path(t).resolve() for t in data.get("tasks") or []]
        if holdout_dir.resolve() not in folders:
            continue
        label = (data.get("rows") or [{}])[0].get("tasks") if len(folders) == 1 else None
        for row in data.get("rows") or []:
            if label is None or row.get("tasks") == label:
                return {**row, "source": str(path.relative_to(run.root)),
                        "harness_commit": (data.get("harness") or {}).get("commit"),
                        "baseline_commit": (data.get("baseline") or {}).get("commit")}
    return None


def _unmeasured(scores: Scores) -> str:
    """Why the evolved harness has no pass@1: a rollback after its last evaluation changed it (never an estimate in its place)."""
    if scores.best_pass_at_1 is not None or not scores.best_commit:
        return ""
    return ("; the best harness was changed by a rollback after the last evaluation, so it was not measured as a whole "
            "(ahe audit shows the verdict; ahe transfer measures it)")


def held_out_section(run: RunFolder) -> dict[str, Any] | None:
    """The rows of a run's own sealed held-out split (`holdout:`, RUN/holdout/result.json), or None."""
    from ahe.evolution.holdout_phase import load_result

    r = load_result(run)
    if r is None:
        return None
    lo, hi = r.ci95_points
    search = {"split": "search", "role": "searched on (every decision)", "projects": [], "tasks": r.search_tasks,
              "seed": r.search_seed, "evolved": r.search_best, "delta": r.search_gain_points, "ci": None, "pending": False,
              "evidence": "the loop's own rounds: the number its decisions were made on (optimistic)"}
    held = {"split": "held-out", "role": "sealed (the number to trust)", "projects": [], "tasks": len(r.held_out),
            "seed": r.seed.pass_at_1, "evolved": r.best.pass_at_1, "delta": r.gain_points,
            "ci": None if lo is None else (lo, hi), "pending": False,
            "evidence": f"scored once after the loop, k={r.k}: {', '.join(r.held_out)}; 95% paired interval over tasks"}
    return {"rows": [search, held], "derive": str(run.root / "holdout" / "result.json"),
            "note": f"The run's own held-out split ({r.source}): no decision of the loop saw those tasks."}


def collect_splits(run: RunFolder, scores: Scores) -> dict[str, Any] | None:
    """Both rows of the section, or None when the run's tasks are not one side of a split."""
    own = held_out_section(run)
    if own is not None:
        return own
    tasks_dir = _tasks_dir(run)
    if tasks_dir is None or tasks_dir.name not in SPLITS:
        return None
    derive = _json(tasks_dir.parent / "derive.json")
    if not isinstance(derive, dict) or not derive.get("holdout"):
        return None
    evolved_on = tasks_dir.name
    other = "holdout" if evolved_on == "train" else "train"
    by_split: dict[str, dict[str, Any]] = {s: {"projects": set(), "tasks": 0} for s in SPLITS}
    for t in derive.get("tasks") or []:
        if t.get("split") in by_split:
            by_split[t["split"]]["projects"].add(t.get("project"))
            by_split[t["split"]]["tasks"] += 1
    first = scores.get(1)
    seed = first.pass_at_1 if first else None
    evolve_row = {"split": evolved_on, "role": "evolved on", "projects": sorted(by_split[evolved_on]["projects"]),
                  "tasks": by_split[evolved_on]["tasks"], "seed": seed, "evolved": scores.best_pass_at_1,
                  "evidence": f"ahe evolve, best of {len(scores.iterations)} evaluation(s)" + _unmeasured(scores),
                  "pending": seed is None, "ci": None}
    held = _held_out_row(run, tasks_dir.parent / other)
    other_dir = tasks_dir.parent / other
    check_row = {"split": other, "role": "held out", "projects": sorted(by_split[other]["projects"]),
                 "tasks": by_split[other]["tasks"], "pending": held is None, "seed": None, "evolved": None}
    if held is None:
        check_row["evidence"] = (f"not checked yet: ahe transfer --harness {run.root} --baseline {run.root}@0 "
                                 f"--models MODEL --tasks {other_dir} --out {run.root / 'holdout'}")
    else:
        check_row.update(seed=held.get("pass_at_1_baseline"), evolved=held.get("pass_at_1_harness"),
                         ci=(held.get("ci95_low"), held.get("ci95_high")),
                         evidence=f"ahe transfer on {held.get('model')} ({held['source']}), "
                                  f"{held.get('paired_tasks')} paired task(s)")
    check_row.setdefault("ci", None)
    for row in (evolve_row, check_row):
        s, e = row.get("seed"), row.get("evolved")
        row["delta"] = None if s is None or e is None else (e - s) * 100
    return {"rows": [evolve_row, check_row], "derive": str(tasks_dir.parent / "derive.json")}
