"""`ahe transfer`: a frozen harness against a baseline, on other models and task sets, paired per task.

No evolution happens: each (model, task set, harness|baseline) is one ordinary rollout
(`ahe.rollout.scheduler.run_rollouts`), written under `--out` and resumable like `ahe eval`.

REF syntax (docs/transfer.md):

    seed                    the bundled seed harness (harness_workspace/ of this repository)
    PATH                    a harness folder (it has agent.yaml), used as it is
    RUN_DIR                 a run folder of `ahe evolve`: its `best` harness (= RUN_DIR@best)
    RUN_DIR@N               iteration N's harness: tag iter-NNN (RUN_DIR@2 → iter-002)
    RUN_DIR@NAME            a tag (best, final, iter-002), branch or commit of RUN_DIR/workspace
    REPO@NAME               the same for any git repository holding a harness

Git refs are exported with `git archive` into `<out>/harnesses/<label>-<commit>/`.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
import tarfile
from pathlib import Path
from statistics import mean
from typing import Any

from ahe.errors import AheError
from ahe.resources import seed_workspace
from ahe.report.efficiency import UNKNOWN, load_trials, side_metrics, task_difficulty
from ahe.report.transfer_models import ModelEntry, load_models_file, looks_like_file
from ahe.run_folder import RunFolder
from ahe.tables import optional

SEED = seed_workspace()
BOOTSTRAP_SAMPLES = 10_000
BOOTSTRAP_SEED = 0


# ---------------------------------------------------------------- REF resolution


def _git_root(path: Path) -> Path | None:
    run = RunFolder(path)
    if (run.workspace / ".git").exists():
        return run.workspace
    if (path / ".git").exists():
        return path
    return None


def resolve_harness(ref: str, out: Path, label: str) -> dict:
    """REF → {"ref", "kind", "path", "commit"}; git refs are exported under out/harnesses/."""
    ref = str(ref)
    if ref == "seed":
        return {"ref": ref, "kind": "folder", "path": str(SEED), "commit": None}
    path_part, sep, name = ref.rpartition("@") if "@" in ref else (ref, "", "")
    path = Path(path_part)
    if not sep:
        if (path / "agent.yaml").is_file():
            return {"ref": ref, "kind": "folder", "path": str(path.resolve()), "commit": None}
        if _git_root(path) is None:
            raise AheError(
                f"harness {ref!r}: not a harness folder (no agent.yaml), nor a run folder or git repository; "
                "use seed, a folder, RUN_DIR, RUN_DIR@N or RUN_DIR@TAG (see docs/transfer.md)"
            )
        name = "best"
    root = _git_root(path)
    if root is None:
        raise AheError(f"harness {ref!r}: {path} is neither a run folder (with workspace/) nor a git repository")
    import git

    repo = git.Repo(root)
    tag = f"iter-{int(name):03d}" if name.isdigit() else name
    try:
        commit = repo.commit(tag)
    except (git.BadName, ValueError, IndexError):
        tags = ", ".join(sorted(t.name for t in repo.tags)) or "none"
        raise AheError(f"harness {ref!r}: {tag!r} is no tag, branch or commit of {root} (tags: {tags})") from None
    dest = out / "harnesses" / f"{label}-{commit.hexsha[:12]}"
    if not (dest / "agent.yaml").is_file():
        buf = io.BytesIO()
        repo.archive(buf, treeish=commit.hexsha, format="tar")
        buf.seek(0)
        tmp = dest.with_name(dest.name + ".tmp")
        if tmp.exists():
            import shutil

            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        with tarfile.open(fileobj=buf) as tf:
            tf.extractall(tmp, filter="data")
        tmp.rename(dest)
    if not (dest / "agent.yaml").is_file():
        raise AheError(f"harness {ref!r}: commit {commit.hexsha[:10]} of {root} has no agent.yaml at its root")
    return {"ref": ref, "kind": "git", "path": str(dest.resolve()), "commit": commit.hexsha, "repo": str(root.resolve())}


# ---------------------------------------------------------------- statistics


def paired_bootstrap(diffs: list[float], *, samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED,
                     confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile bootstrap CI of the mean per-task difference, resampling tasks with replacement."""
    n = len(diffs)
    if n == 0:
        return None, None
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(samples))
    lo_i = int((1 - confidence) / 2 * samples)
    hi_i = min(samples - 1, int((1 + confidence) / 2 * samples) - 1)
    return means[lo_i], means[hi_i]


def compare(model: str, tasks_label: str, h: Any, b: Any, hm: dict | None = None, bm: dict | None = None,
            difficulty: dict[str, str] | None = None) -> dict:
    """One table row from two RunResults (harness, baseline) on the same model and task set.

    `hm`/`bm` are `ahe.report.efficiency.side_metrics` of the two sides: tokens per trial and
    Succ/Mtok then leave infrastructure-aborted trials out, as the paper does, and the row gets
    the same figures per difficulty.
    """
    common = sorted(t for t in set(h.tasks) & set(b.tasks) if h.tasks[t].trials and b.tasks[t].trials)
    per_task = {t: {"harness": h.tasks[t].pass_rate, "baseline": b.tasks[t].pass_rate,
                    "delta_points": 100 * (h.tasks[t].pass_rate - b.tasks[t].pass_rate)} for t in common}
    diffs = [v["delta_points"] for v in per_task.values()]
    lo, hi = paired_bootstrap(diffs)

    def spm(r: Any) -> float | None:
        return r.pass_at_1 * 1e6 / r.mean_tokens_per_trial if r.mean_tokens_per_trial else None

    row = {
        "model": model,
        "tasks": tasks_label,
        "paired_tasks": len(common),
        "pass_at_1_harness": h.pass_at_1,
        "pass_at_1_baseline": b.pass_at_1,
        "delta_points": mean(diffs) if diffs else None,
        "ci95_low": lo,
        "ci95_high": hi,
        "tokens_per_trial_harness": hm["tokens_per_trial"] if hm else h.mean_tokens_per_trial,
        "tokens_per_trial_baseline": bm["tokens_per_trial"] if bm else b.mean_tokens_per_trial,
        "successes_per_mtok_harness": hm["successes_per_mtok"] if hm else spm(h),
        "successes_per_mtok_baseline": bm["successes_per_mtok"] if bm else spm(b),
        "trials_harness": h.n_trials,
        "trials_baseline": b.n_trials,
        "infra_errors_harness": h.infra_errors,
        "infra_errors_baseline": b.infra_errors,
        "missing_trials": h.missing_trials + b.missing_trials,
        "per_task": per_task,
    }
    if hm and bm:
        row["by_difficulty"] = _by_difficulty(hm, bm, per_task, difficulty or {})
    return row


def _by_difficulty(hm: dict, bm: dict, per_task: dict[str, dict], difficulty: dict[str, str]) -> dict[str, dict]:
    out = {}
    for d in list(hm["by_difficulty"]) + [x for x in bm["by_difficulty"] if x not in hm["by_difficulty"]]:
        hb, bb = hm["by_difficulty"].get(d, {}), bm["by_difficulty"].get(d, {})
        tasks = [t for t in per_task if difficulty.get(t, UNKNOWN) == d]
        diffs = [per_task[t]["delta_points"] for t in tasks]
        lo, hi = paired_bootstrap(diffs)
        out[d] = {"tasks": len(tasks), "pass_at_1_harness": hb.get("pass_at_1"), "pass_at_1_baseline": bb.get("pass_at_1"),
                  "delta_points": mean(diffs) if diffs else None, "ci95_low": lo, "ci95_high": hi,
                  "tokens_per_trial_harness": hb.get("tokens_per_trial"), "tokens_per_trial_baseline": bb.get("tokens_per_trial"),
                  "successes_per_mtok_harness": hb.get("successes_per_mtok"),
                  "successes_per_mtok_baseline": bb.get("successes_per_mtok")}
    return out


# ---------------------------------------------------------------- the command


def _labels(tasks: list[Path]) -> list[str]:
    labels: list[str] = []
    for t in tasks:
        base = Path(t).resolve().name or "tasks"
        lab, i = base, 2
        while lab in labels:
            lab, i = f"{base}-{i}", i + 1
        labels.append(lab)
    return labels


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


def run_transfer(
    *,
    harness: str,
    baseline: str = "seed",
    models: list[str] | list[ModelEntry],
    tasks: list[Path],
    k: int = 1,
    concurrency: int = 4,
    out: Path,
    base_url: str | None = None,
    mock_policy: Path | None = None,
    include: list[str] | None = None,
    sandbox: str = "local",
    isolation: str = "auto",
    retry_infra: int = 0,
    agent_timeout: float | None = None,
    log: Any = None,
    executor: str = "local",
    ray_address: str | None = None,
) -> dict:
    """Evaluate harness and baseline on every model × task set; returns (and writes) transfer.json's content.

    `models` are names (all behind `base_url`, or the mock) or entries of a models file, each
    with its own endpoint, key variable and parameters.
    """
    from ahe.llm import resolve_role
    from ahe.io import atomic_write_json
    from ahe.testing.endpoint import mock_endpoint

    entries = _check_transfer_args(models, tasks, sandbox, isolation, k)
    if executor == "local":  # e.g. docker with no engine: one sentence now, not an error per trial
        from ahe.tasks.sandboxes import ready_backend

        ready_backend(sandbox, isolation)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    h = resolve_harness(harness, out, "harness")
    b = resolve_harness(baseline, out, "baseline")
    labels = _labels(tasks)
    difficulty = {lab: task_difficulty(Path(t), include) for t, lab in zip(tasks, labels)}
    seals = {lab: seal_task_set(Path(t), include, out / "sealed" / _safe(lab)) for t, lab in zip(tasks, labels)}
    rows = []
    with mock_endpoint(mock_policy) as url:
        if url and log:
            log(f"[yellow]using the scripted MOCK model server at {url} (policy {mock_policy})[/]")
        roles = []
        for e in entries:
            role = e.role(url or base_url)
            resolve_role("agent", role)  # a missing key variable fails here, before any trial
            roles.append(role)
        for e, role in zip(entries, roles):
            for task_dir, label in zip(tasks, labels):
                sides = {side: (hh, out / "evals" / _safe(e.name) / _safe(label) / side) for side, hh in
                         (("harness", h), ("baseline", b))}
                settings = {"tasks_dir": Path(task_dir), "include": include or [], "k": k, "concurrency": concurrency,
                            "agent_role": role, "sandbox": sandbox, "isolation": isolation, "retry_infra": retry_infra,
                            "agent_timeout_sec": agent_timeout, "executor": executor, "ray_address": ray_address,
                            "seal_dir": seals[label]}
                if log:
                    for side, (hh, dest) in sides.items():
                        log(f"evaluating {side} ({hh['ref']}) with {e.name} ({role.model} at {role.base_url or 'the default endpoint'}) on {label} → {dest}")
                results = asyncio.run(_evaluate_sides(sides, settings))
                same_benchmark(results, f"{e.name} on {label}")
                metrics = {side: side_metrics(load_trials(dest), difficulty[label]) for side, (_, dest) in sides.items()}
                row = compare(e.name, label, results["harness"], results["baseline"], metrics["harness"],
                              metrics["baseline"], difficulty[label])
                row.update(model_sent=role.model, base_url=role.base_url, params=role.params,
                           tasks_dir=str(Path(task_dir).resolve()), benchmark_hash=results["harness"].benchmark_hash,
                           out_harness=str(sides["harness"][1]),
                           out_baseline=str(sides["baseline"][1]))
                rows.append(row)
    data = _transfer_record(h, b, entries, tasks, k, mock_policy is not None, rows)
    atomic_write_json(out / "transfer.json", data)
    return data


def _transfer_record(h: dict, b: dict, entries: list, tasks: list[Path], k: int, mock: bool, rows: list) -> dict:
    """transfer.json's content: both sides, the grid, how the intervals were made, the rows."""
    return {
        "harness": h,
        "baseline": b,
        "models": [e.name for e in entries],
        "tasks": [str(Path(t).resolve()) for t in tasks],
        "k": k,
        "mock": mock,
        "ci": {"method": "paired percentile bootstrap over tasks (resample tasks with replacement, mean per-task "
                         "pass-rate difference)", "samples": BOOTSTRAP_SAMPLES, "seed": BOOTSTRAP_SEED, "confidence": 0.95},
        "tokens": "tokens per trial and successes per million tokens leave infrastructure-aborted trials out",
        "rows": rows,
    }


def seal_task_set(tasks: Path, include: list[str] | None, seal_dir: Path) -> Path:
    """Seal a task set before either side runs (ahe.tasks.snapshot), so both are judged by the same verifiers."""
    from ahe.tasks import load_tasks
    from ahe.tasks.snapshot import seal_tasks

    seal_tasks(load_tasks(tasks, include=include or None).tasks, seal_dir)
    return seal_dir


def same_benchmark(results: dict[str, Any], what: str) -> None:
    """Refuse to pair two sides that ran on different benchmarks (their sealed task hashes differ)."""
    h, b = results["harness"], results["baseline"]
    if h.benchmark_hash != b.benchmark_hash:
        diff = sorted(t for t in set(h.task_hashes) | set(b.task_hashes) if h.task_hashes.get(t) != b.task_hashes.get(t))
        raise AheError(f"transfer {what}: the harness and baseline results are on different benchmarks (benchmark hash "
                       f"{str(h.benchmark_hash)[:12]} vs {str(b.benchmark_hash)[:12]}; tasks differing: "
                       f"{', '.join(diff[:5]) or 'none'}); they cannot be compared — run both into a new --out folder.")


def _check_transfer_args(models: list[str] | list[ModelEntry], tasks: list[Path], sandbox: str, isolation: str,
                         k: int) -> list[ModelEntry]:
    """The model entries to evaluate; one sentence naming the option for anything unusable."""
    entries = [m if isinstance(m, ModelEntry) else ModelEntry(name=m.strip()) for m in models
               if isinstance(m, ModelEntry) or (m and m.strip())]
    if not entries:
        raise AheError("--models: give at least one model name (comma-separated, e.g. --models gpt-4o,qwen3-32b) or a models file")
    if not tasks:
        raise AheError("--tasks: give at least one task folder")
    for t in tasks:
        if not Path(t).is_dir():
            raise AheError(f"--tasks {t}: no such folder")
    from ahe.sandbox.registry import get_backend

    get_backend(sandbox)  # an unknown backend: one sentence naming the registered ones
    if isolation not in ("auto", "bwrap", "none"):
        raise AheError(f"--isolation must be auto, bwrap or none, not {isolation!r}")
    if k < 1:
        raise AheError(f"-k must be at least 1, not {k}")
    return entries


async def _evaluate_sides(sides: dict[str, tuple[dict, Path]], settings: dict) -> dict[str, Any]:
    """Both sides on one event loop and one executor, whose clients are closed on that loop."""
    from ahe.rollout.executor import AsyncioExecutor
    from ahe.rollout.scheduler import RolloutConfig, run_rollouts

    if settings.get("executor") not in (None, "local"):  # e.g. ray: the scheduler makes and closes its own
        return {side: await run_rollouts(RolloutConfig(workspace=Path(hh["path"]), **settings), dest)
                for side, (hh, dest) in sides.items()}
    executor = AsyncioExecutor(settings["concurrency"])
    try:
        return {side: await run_rollouts(RolloutConfig(workspace=Path(hh["path"]), **settings), dest, executor=executor)
                for side, (hh, dest) in sides.items()}
    finally:
        await executor.ctx.aclose()


def _f(x: float | None, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


# what a narrow terminal leaves out first (ahe.tables; Markdown and JSON keep every column)
NARROW_DROPS = ("succ./Mtok baseline", "succ./Mtok harness", "tokens/trial baseline", "tokens/trial harness")


def transfer_table(data: dict) -> Any:
    from rich.table import Table

    t = Table(title=f"ahe transfer — harness {data['harness']['ref']} vs baseline {data['baseline']['ref']} (k={data['k']})")
    cols = ("model", "tasks", "pass@1 harness", "pass@1 baseline", "Δ points", "95% CI", "tokens/trial harness",
            "tokens/trial baseline", "succ./Mtok harness", "succ./Mtok baseline")
    for c in cols:
        t.add_column(c, justify="left" if c in ("model", "tasks") else "right")
    for r in data["rows"]:
        d = r["delta_points"]
        style = "green" if d and d > 0 else "red" if d and d < 0 else ""
        t.add_row(
            r["model"], r["tasks"], _f(r["pass_at_1_harness"], ".3f"), _f(r["pass_at_1_baseline"], ".3f"),
            f"[{style}]{_f(d, '+.1f')}[/]" if style else _f(d, "+.1f"),
            f"[{_f(r['ci95_low'], '+.1f')}, {_f(r['ci95_high'], '+.1f')}]",
            _f(r["tokens_per_trial_harness"], ".0f"), _f(r["tokens_per_trial_baseline"], ".0f"),
            _f(r["successes_per_mtok_harness"], ".1f"), _f(r["successes_per_mtok_baseline"], ".1f"),
        )
    return optional(t, *NARROW_DROPS)


def difficulty_table(data: dict) -> Any:
    """The same comparison per difficulty (task.toml's [metadata] difficulty)."""
    from rich.table import Table

    t = Table(title="by difficulty")
    cols = ("model", "tasks", "difficulty", "n tasks", "pass@1 harness", "pass@1 baseline", "Δ points", "95% CI",
            "tokens/trial harness", "tokens/trial baseline", "succ./Mtok harness", "succ./Mtok baseline")
    for c in cols:
        t.add_column(c, justify="left" if c in ("model", "tasks", "difficulty") else "right")
    for r in data["rows"]:
        for d, x in (r.get("by_difficulty") or {}).items():
            t.add_row(r["model"], r["tasks"], d, str(x["tasks"]), _f(x["pass_at_1_harness"], ".3f"),
                      _f(x["pass_at_1_baseline"], ".3f"), _f(x["delta_points"], "+.1f"),
                      f"[{_f(x['ci95_low'], '+.1f')}, {_f(x['ci95_high'], '+.1f')}]",
                      _f(x["tokens_per_trial_harness"], ".0f"), _f(x["tokens_per_trial_baseline"], ".0f"),
                      _f(x["successes_per_mtok_harness"], ".1f"), _f(x["successes_per_mtok_baseline"], ".1f"))
    return optional(t, *NARROW_DROPS, "n tasks")


def transfer_command(
    harness: str,
    baseline: str | None,
    models: list[str] | str,
    tasks: list[Path],
    k: int = 1,
    concurrency: int = 4,
    out: Path | None = None,
    base_url: str | None = None,
    mock_policy: Path | None = None,
    json_out: bool | str = False,  # or the format: table, markdown, json
    include: list[str] | None = None,
    sandbox: str = "local",
    isolation: str = "auto",
    retry_infra: int = 0,
    agent_timeout: float | None = None,
    executor: str = "local",
    ray_address: str | None = None,
) -> int:
    """`ahe transfer`: prints the table (or transfer.json with --json); 0, or 3 when trials hit infrastructure errors."""
    import time

    from rich.console import Console
    from rich.markup import escape

    from ahe.tables import TableOutput

    con = TableOutput(json_out)
    json_out = con.fmt == "json"
    err = Console(stderr=True)
    items = [models] if isinstance(models, str) else list(models)
    if len(items) == 1 and looks_like_file(items[0]):
        models = load_models_file(Path(items[0]))
    else:
        models = [m for item in items for m in item.split(",")]
    out = Path(out) if out else Path("runs") / time.strftime("transfer-%Y%m%d-%H%M%S")
    data = run_transfer(
        harness=harness, baseline=baseline or "seed", models=models, tasks=[Path(t) for t in tasks], k=k,
        concurrency=concurrency, out=out, base_url=base_url, mock_policy=mock_policy, include=include,
        sandbox=sandbox, isolation=isolation, retry_infra=retry_infra, agent_timeout=agent_timeout,
        executor=executor or "local", ray_address=ray_address, log=None if json_out else (lambda s: err.print(escape(s), highlight=False)),
    )
    if json_out:
        print(json.dumps(data, indent=2))
    else:
        con.print(transfer_table(data))
        if any(len(r.get("by_difficulty") or {}) > 0 for r in data["rows"]):
            con.print(difficulty_table(data))
        err.print(escape(f"transfer.json: {out / 'transfer.json'}"))
    infra = sum(r["infra_errors_harness"] + r["infra_errors_baseline"] for r in data["rows"])
    return 0 if infra == 0 else 3
