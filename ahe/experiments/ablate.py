"""`ahe ablate`: which component classes carry an evolved harness's gain (the paper's ablation).

For each class the evolved harness changed against its baseline, two workspaces are composed
(`ahe.experiments.compose`): "seed + only C" and, when more than one class changed, "evolved − C".
Each must pass the validation gate's checks (protected parts, loading, a smoke session) before
it is evaluated; all variants run on the same tasks, k and model, and are compared task by
task with the seed and with the full harness (paired bootstrap, as `ahe transfer`).
Folders with the same content are evaluated once. Everything lands in `--out` (default
`RUN_DIR/ablation`); re-running the same command resumes: finished trials are not re-run.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Callable

import yaml

from ahe.errors import AheError
from ahe.experiments.compose import OTHER, compose, diff_harnesses, read_tree, tree_hash, validate
from ahe.report.efficiency import load_trials, side_metrics, task_difficulty
from ahe.report.transfer import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, paired_bootstrap, resolve_harness

FLIP = 0.5  # a task "fixed"/"broken" against the seed: its pass rate moved by at least this


def _run_root(target: str) -> Path | None:
    path = Path(target.rpartition("@")[0] if "@" in target else target)
    return path if (path / "workspace" / ".git").exists() and (path / "experiment.yaml").is_file() else None


def run_settings(run: Path | None) -> dict[str, Any]:
    """The agent model, mock policy and rollout settings the run was evaluated with (experiment.yaml)."""
    if run is None:
        return {}
    try:
        data = yaml.safe_load((run / "experiment.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise AheError(f"{run / 'experiment.yaml'}: cannot be read ({exc}); pass --model/--base-url explicitly") from None
    keys = ("include", "sandbox", "isolation", "pass_threshold", "agent_timeout_sec", "retry_infra", "tasks")
    out = {k: data[k] for k in keys if data.get(k) is not None}
    out["agent_role"] = (data.get("models") or {}).get("agent") or {}
    out["mock_policy"] = (data.get("mock_policies") or {}).get("agent")
    return out


def plan_variants(classes: list[str]) -> list[dict]:
    """seed, full, then per class "only C" and (when several classes changed) "without C"."""
    variants = [{"label": "seed", "kind": "seed", "take": []}, {"label": "full", "kind": "full", "take": classes}]
    for c in classes:
        variants.append({"label": f"only {c}", "kind": "only", "class": c, "take": [c]})
    if len(classes) > 1:
        for c in classes:
            variants.append({"label": f"without {c}", "kind": "without", "class": c, "take": [x for x in classes if x != c]})
    return variants


def _paired(a: dict[str, float], b: dict[str, float]) -> dict:
    common = sorted(set(a) & set(b))
    diffs = [100 * (a[t] - b[t]) for t in common]
    lo, hi = paired_bootstrap(diffs)
    return {"delta_points": sum(diffs) / len(diffs) if diffs else None, "ci95_low": lo, "ci95_high": hi,
            "paired_tasks": len(common)}


def compare_variants(variants: list[dict]) -> dict:
    """Deltas against seed and full, fixes/breaks against the seed, and the non-additivity line."""
    by = {v["label"]: v for v in variants if v.get("metrics")}
    seed, full = by.get("seed"), by.get("full")
    for v in variants:
        m = v.get("metrics")
        if not m:
            continue
        if seed:
            v["vs_seed"] = _paired(m["per_task"], seed["metrics"]["per_task"])
            s = seed["metrics"]["per_task"]
            v["fixes"] = sorted(t for t, r in m["per_task"].items() if t in s and r - s[t] >= FLIP)
            v["breaks"] = sorted(t for t, r in m["per_task"].items() if t in s and s[t] - r >= FLIP)
        if full:
            v["vs_full"] = _paired(m["per_task"], full["metrics"]["per_task"])
    singles = [v["vs_seed"]["delta_points"] for v in variants if v["kind"] == "only" and v.get("vs_seed")]
    total = full.get("vs_seed", {}).get("delta_points") if full else None
    complete = len(singles) == sum(v["kind"] == "only" for v in variants) and None not in singles
    s = sum(singles) if singles and complete else None
    return {"sum_of_single_class_gains": s, "full_gain": total,
            "interaction": None if s is None or total is None else total - s}


async def _evaluate(variants: list[dict], out: Path, rollout: dict, log: Callable[[str], None]) -> None:
    from ahe.rollout.executor import AsyncioExecutor
    from ahe.rollout.scheduler import RolloutConfig, run_rollouts

    executor = AsyncioExecutor(rollout["concurrency"])
    done: dict[str, Path] = {}
    try:
        for v in variants:
            if v.get("errors"):
                continue
            dest = out / "evals" / v["tree"]
            v["eval_dir"] = str(dest)
            if v["tree"] in done:
                log(f"{v['label']}: same files as an earlier variant, evaluated once ({dest})")
                continue
            log(f"evaluating {v['label']} → {dest}")
            cfg = RolloutConfig(workspace=Path(v["path"]), **{k: x for k, x in rollout.items() if k != "concurrency"},
                                concurrency=rollout["concurrency"])
            await run_rollouts(cfg, dest, executor=executor)
            done[v["tree"]] = dest
    finally:
        await executor.ctx.aclose()


def run_ablation(*, target: str, tasks: Path, k: int = 2, baseline: str | None = None, out: Path | None = None,
                 include: list[str] | None = None, model: str | None = None, base_url: str | None = None,
                 mock_policy: Path | None = None, concurrency: int = 4, log: Callable[[str], None] = lambda s: None) -> dict:
    """Compose, validate, evaluate and compare every variant; returns (and writes) ablation.json's content."""
    from ahe.llm import resolve_role
    from ahe.llm.types import RoleConfig
    from ahe.testing.endpoint import mock_endpoint

    if not Path(tasks).is_dir():
        raise AheError(f"--tasks {tasks}: no such folder")
    if k < 1:
        raise AheError(f"-k must be at least 1, not {k}")
    run = _run_root(target)
    settings = run_settings(run)
    out = Path(out) if out else (run / "ablation" if run else Path("runs") / time.strftime("ablate-%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    evolved = resolve_harness(target, out, "evolved")
    base = resolve_harness(baseline or (f"{run}@0" if run else "seed"), out, "baseline")
    seed_dir, evo_dir = Path(base["path"]), Path(evolved["path"])
    diff = diff_harnesses(seed_dir, evo_dir)
    if not diff.classes:
        raise AheError(f"{target}: the harness has the same files as the baseline {base['ref']}; there is nothing to ablate")
    variants = plan_variants(diff.classes)
    for v in variants:
        comp = compose(seed_dir, evo_dir, set(v["take"]), diff, out / "workspaces" / v["label"].replace(" ", "-"))
        v.update(path=str(comp.path), notes=comp.notes, tree=tree_hash(comp.path))
        v["errors"] = asyncio.run(validate(comp.path, seed_dir))
        log(f"{v['label']}: {'passes the validation gate' if not v['errors'] else 'REJECTED: ' + '; '.join(v['errors'])}")
    full = next(v for v in variants if v["kind"] == "full")
    if read_tree(Path(full["path"])) != read_tree(evo_dir):
        full["notes"].append("the composed full harness differs from the evolved folder (files outside the registry's reach)")
    include = include if include is not None else settings.get("include", [])
    policy = mock_policy or (Path(settings["mock_policy"]) if settings.get("mock_policy") else None)
    if policy is not None and not Path(policy).is_file():
        raise AheError(f"mock policy {policy}: no such file (from {'--mock-policy' if mock_policy else 'the run'}'s settings)")
    role = RoleConfig.model_validate(settings.get("agent_role") or {})
    with mock_endpoint(policy) as url:
        if url:
            log(f"using the scripted MOCK model server at {url} (policy {policy})")
            role = role.model_copy(update={"base_url": url, "model": model or role.model or "mock"})
        else:
            role = role.model_copy(update={k: x for k, x in (("model", model), ("base_url", base_url)) if x})
        resolve_role("agent", role)
        # one seal for every variant (ahe.tasks.snapshot): all are judged by the verifiers as they were at the start
        rollout = {"tasks_dir": Path(tasks), "include": include, "k": k, "concurrency": concurrency, "agent_role": role,
                   "seal_dir": out / "sealed",
                   **{x: settings[x] for x in ("sandbox", "isolation", "pass_threshold", "agent_timeout_sec", "retry_infra") if x in settings}}
        asyncio.run(_evaluate(variants, out, rollout, log))
    difficulty = task_difficulty(Path(tasks), include)
    for v in variants:
        if v.get("eval_dir"):
            v["metrics"] = side_metrics(load_trials(Path(v["eval_dir"])), difficulty)
    data = {
        "harness": evolved, "baseline": base, "tasks": str(Path(tasks).resolve()), "include": include, "k": k,
        "model": role.model, "mock": policy is not None,
        "classes": diff.classes, "changed_files": diff.files, "changed_registry": diff.registry,
        "variants": variants, "additivity": compare_variants(variants),
        "ci": {"method": "paired percentile bootstrap over tasks", "samples": BOOTSTRAP_SAMPLES, "seed": BOOTSTRAP_SEED,
               "confidence": 0.95},
        "flip_threshold": FLIP,
    }
    from ahe.io import atomic_write_json

    atomic_write_json(out / "ablation.json", data)
    return data


def _f(x: float | None, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


def _delta(d: dict | None) -> str:
    if not d or d.get("delta_points") is None:
        return "n/a"
    return f"{d['delta_points']:+.1f} [{_f(d['ci95_low'], '+.1f')}, {_f(d['ci95_high'], '+.1f')}]"


def ablation_table(data: dict) -> Any:
    from rich.table import Table

    diffs = []
    for v in data["variants"]:
        for d in (v.get("metrics") or {}).get("by_difficulty", {}):
            if d not in diffs:
                diffs.append(d)
    t = Table(title=f"ahe ablate — {data['harness']['ref']} vs {data['baseline']['ref']} (k={data['k']}, model {data['model']})")
    for c in ("variant", "pass@1", *diffs, "Δ vs seed [95% CI]", "Δ vs full [95% CI]", "tokens/trial", "succ./Mtok",
              "fixes vs seed", "breaks vs seed"):
        t.add_column(c, justify="left" if c in ("variant", "fixes vs seed", "breaks vs seed") else "right")
    for v in data["variants"]:
        m = v.get("metrics")
        if not m:
            why = "; ".join(v.get("errors") or ["not evaluated"])
            t.add_row(v["label"], "[red]rejected[/]", *[""] * len(diffs), why[:80], "", "", "", "", "")
            continue
        by = m["by_difficulty"]
        t.add_row(v["label"], _f(m["pass_at_1"], ".3f"), *[_f(by[d]["pass_at_1"], ".3f") if d in by else "-" for d in diffs],
                  _delta(v.get("vs_seed")), _delta(v.get("vs_full")), _f(m["tokens_per_trial"], ".0f"),
                  _f(m["successes_per_mtok"], ".1f"), ", ".join(v.get("fixes", [])) or "-", ", ".join(v.get("breaks", [])) or "-")
    from ahe.tables import optional

    return optional(t, "succ./Mtok", "tokens/trial", *diffs, "Δ vs full [95% CI]")  # when the screen is narrow


def additivity_line(data: dict) -> str:
    a = data["additivity"]
    if a["sum_of_single_class_gains"] is None or a["full_gain"] is None:
        return "non-additivity: n/a (a single-class variant or the full harness was not evaluated)"
    return (f"non-additivity: the single-class gains sum to {a['sum_of_single_class_gains']:+.1f} points; the full harness "
            f"gains {a['full_gain']:+.1f}; interaction {a['interaction']:+.1f} points")


def ablate_command(target: str, tasks: Path, k: int = 2, baseline: str | None = None, out: Path | None = None,
                   include: list[str] | None = None, model: str | None = None, base_url: str | None = None,
                   mock_policy: Path | None = None, concurrency: int = 4, json_out: bool | str = False) -> int:
    """`ahe ablate`: prints the table (Markdown, or ablation.json; ahe.tables); 0, or 3 when trials hit infrastructure errors."""
    from rich.console import Console

    from ahe.tables import TableOutput

    con = TableOutput(json_out)
    json_out = con.fmt == "json"
    err = Console(stderr=True)
    data = run_ablation(target=target, tasks=tasks, k=k, baseline=baseline, out=out, include=include or None, model=model,
                        base_url=base_url, mock_policy=mock_policy, concurrency=concurrency,
                        log=(lambda s: None) if json_out else (lambda s: err.print(s, highlight=False)))
    if json_out:
        print(json.dumps(data, indent=2))
    else:
        con.print(ablation_table(data))
        con.print(additivity_line(data))
        other = [v for v in data["variants"] if v.get("notes")]
        for v in other:
            for n in v["notes"]:
                err.print(f"{v['label']}: {n}", highlight=False)
        if OTHER in data["classes"]:
            err.print(f"files outside the seven component classes changed too: {data['changed_files'].get(OTHER)}")
    infra = sum((v.get("metrics") or {}).get("infra_errors", 0) for v in data["variants"])
    return 0 if infra == 0 else 3
