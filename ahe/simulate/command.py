"""`ahe simulate`: the policy table over seeds, side by side on the same seeds."""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ahe.errors import AheError, ConfigError
from ahe.simulate.metrics import PolicyRow, RunMetrics, table
from ahe.simulate.scenario import Scenario, load_scenario


def _one_seed(sc_json: str, out: str, seed: int, keep: bool) -> list[dict]:
    """Worker: every policy on one seed (same world, same draws)."""
    import shutil

    from ahe.simulate.runner import run_one, write_tasks
    import tempfile
    from ahe.simulate.world import make_world

    sc = Scenario.model_validate_json(sc_json)
    root = Path(out)
    tasks = write_tasks(root / "tasks", sc.tasks.count)
    world = make_world(sc, seed)
    seed_dir = root / f"seed-{seed:03d}"
    seed_dir.mkdir(parents=True, exist_ok=True)
    (seed_dir / "truth.json").write_text(world.model_dump_json(indent=1))
    rows = []
    for policy in sc.policies:
        if keep:
            rows.append(run_one(sc, world, policy, seed_dir / policy, tasks).model_dump())
            continue
        # a run folder nobody keeps: in memory when it can be; named like every AHE temporary folder, so swept after a kill
        scratch = Path(tempfile.mkdtemp(prefix=f"ahe-simrun-{os.getpid()}-", dir=scratch_root()))
        try:
            rows.append(run_one(sc, world, policy, scratch / policy, tasks).model_dump())
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return rows


def scratch_root() -> Path | None:
    """A memory-backed folder for the run folders that are thrown away (file system calls were a third
    of a simulated run on disk), or None for the ordinary temporary directory."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else None


def check_policies(names: list[str]) -> None:
    """Every name a registered verdict policy (plugins included), or one sentence before any run starts."""
    from ahe.evolution.registry import get_policy

    for n in names:
        try:
            get_policy(n)
        except AheError as exc:
            raise ConfigError(f"policies: {exc}") from None


def simulate_command(scenario: Path | None, out: Path | None, seeds: int | None, iterations: int | None,
                     jobs: int | None, keep_runs: str, console: Console, *, policies: list[str] | None = None) -> list[PolicyRow]:
    from ahe.tempdirs import sweep_stale

    if (root := scratch_root()) is not None:
        sweep_stale(root)  # run folders of killed workers
    sc = load_scenario(scenario)
    if policies:
        sc = sc.model_copy(update={"policies": policies})
    updates = {k: v for k, v in (("seeds", seeds), ("iterations", iterations)) if v is not None}
    sc = sc.model_copy(update=updates)
    check_policies(sc.policies)
    out = (out or Path("runs") / f"simulate-{sc.name}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs.jsonl").unlink(missing_ok=True)
    jobs = jobs or max(1, min(4, os.cpu_count() or 1))
    console.print("[bold]ahe simulate[/] " + escape(f"{sc.name}: {sc.tasks.count} tasks, k={sc.k}, {sc.iterations} iterations, "
                  f"{sc.seeds} seeds × {len(sc.policies)} policies ({', '.join(sc.policies)}), {jobs} jobs → {out}"))
    t0 = time.monotonic()
    metrics: list[RunMetrics] = []
    seeds_ = list(range(sc.first_seed, sc.first_seed + sc.seeds))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futs = {pool.submit(_one_seed, sc.model_dump_json(), str(out), s,
                            keep_runs == "all" or (keep_runs == "first" and s == seeds_[0])): s for s in seeds_}
        for n, fut in enumerate(as_completed(futs), start=1):
            got = [RunMetrics.model_validate(r) for r in fut.result()]
            metrics += got
            with open(out / "runs.jsonl", "a", encoding="utf-8") as f:  # finished seeds survive an interruption
                f.writelines(m.model_dump_json() + "\n" for m in got)
            console.print(f"  seed {futs[fut]} done ({n}/{len(seeds_)}, {time.monotonic() - t0:.0f} s): "
                          + ", ".join(f"{m.policy} {m.real_correct}/{m.real_changes}" for m in got))
    rows = table(sorted(metrics, key=lambda m: (m.seed, sc.policies.index(m.policy))))
    took = time.monotonic() - t0
    console.print(render(rows))
    rounds = sum(1 for _ in metrics) * (sc.iterations + 1)
    console.print(escape(f"{len(metrics)} runs, {rounds} evaluated rounds in {took:.0f} s "
                         f"({took * jobs / max(1, rounds):.2f} s per round per job). Run folders: {out}"))
    (out / "table.json").write_text(json.dumps({"scenario": json.loads(sc.model_dump_json()), "rows": [r.model_dump() for r in rows],
                                                "runs": [m.model_dump() for m in metrics], "seconds": round(took, 1)}, indent=1))
    (out / "table.md").write_text(markdown(rows, sc))
    return rows


def _ci(x: tuple[float, float, float], fmt: str = "{:.1%}") -> str:
    return f"{fmt.format(x[0])} [{fmt.format(x[1])}, {fmt.format(x[2])}]"


def render(rows: list[PolicyRow]) -> Table:
    t = Table(title="Decisions by policy (mean [95% interval] over seeds)")
    for col in ("policy", "correct decisions (real effect)", "neutral kept", "H_best below oracle (points)",
                "final below oracle (points)", "rollouts", "× paper"):
        t.add_column(col)
    for r in rows:
        t.add_row(r.policy, _ci(r.accuracy), _ci(r.bloat), _ci(r.best_gap, "{:.2f}"), _ci(r.final_gap, "{:.2f}"),
                  _ci(r.rollouts, "{:.0f}"), f"{r.rollouts_vs_paper:.2f}" if r.rollouts_vs_paper else "-")
    return t


def markdown(rows: list[PolicyRow], sc: Scenario) -> str:
    lines = ["| policy | correct decisions (real effect) | neutral kept | H_best below oracle (points) | final below oracle (points) | rollouts | × paper |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.policy} | {_ci(r.accuracy)} | {_ci(r.bloat)} | {_ci(r.best_gap, '{:.2f}')} | "
                     f"{_ci(r.final_gap, '{:.2f}')} | {_ci(r.rollouts, '{:.0f}')} | "
                     f"{f'{r.rollouts_vs_paper:.2f}' if r.rollouts_vs_paper else '-'} |")
    return "\n".join(lines) + "\n"


def suite_command(name: str, out: Path | None, seeds: int | None, seed_range: str, policies: list[str] | None,
                  jobs: int | None, keep_runs: str, console: Console) -> list:
    """Every policy on every world of the suite, (world, seed) pairs spread over `jobs` processes."""
    from ahe.simulate.suite import load_suite, seed_list
    from ahe.tempdirs import sweep_stale

    suite = load_suite(name)
    pols = policies or suite.policies
    check_policies(pols)
    seeds_ = seed_list(seed_range, seeds or suite.seeds)
    out = (out or Path("runs") / f"suite-{suite.name}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    if (root := scratch_root()) is not None:
        sweep_stale(root)
    (out / "runs.jsonl").unlink(missing_ok=True)
    jobs = jobs or max(1, min(4, os.cpu_count() or 1))
    worlds = {w.name: w.model_copy(update={"policies": pols}) for w in suite.worlds}
    console.print(f"[bold]ahe simulate --suite[/] {suite.name}: {len(worlds)} worlds × {len(seeds_)} {seed_range} seeds "
                  f"({seeds_[0]}–{seeds_[-1]}) × {len(pols)} policies ({', '.join(pols)}), {jobs} jobs → {out}")
    t0 = time.monotonic()
    metrics: dict[str, list[RunMetrics]] = {w: [] for w in worlds}
    # the biggest worlds first, so the last jobs to finish are short ones
    # seed by seed (an interrupted suite still covers every world), the biggest worlds of a seed first
    order = sorted(((w, s) for w in worlds for s in seeds_),
                   key=lambda ws: (ws[1], -worlds[ws[0]].tasks.count * worlds[ws[0]].k * worlds[ws[0]].iterations))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futs = {pool.submit(_one_seed, worlds[w].model_dump_json(), str(out / w), s,
                            keep_runs == "all" or (keep_runs == "first" and s == seeds_[0])): (w, s) for w, s in order}
        for n, fut in enumerate(as_completed(futs), start=1):
            w, s = futs[fut]
            got = [RunMetrics.model_validate(r) for r in fut.result()]
            metrics[w] += got
            with open(out / "runs.jsonl", "a", encoding="utf-8") as f:
                f.writelines(json.dumps({"world": w, **m.model_dump()}) + "\n" for m in got)
            if n % max(1, len(futs) // 20) == 0 or n == len(futs):
                console.print(f"  {n}/{len(futs)} (world, seed) runs done, {time.monotonic() - t0:.0f} s")
    return write_suite_table(suite, worlds, metrics, pols, seeds_, seed_range, time.monotonic() - t0, out, console)


def suite_table_from_runs(name: str, out: Path, seed_range: str, console: Console) -> list:
    """The table of an interrupted (or finished) suite, from the runs in OUT/runs.jsonl: the seeds every
    world finished under every policy."""
    from ahe.simulate.suite import load_suite

    suite = load_suite(name)
    path = out / "runs.jsonl"
    if not path.exists():
        raise ConfigError(f"--table-only: {path} does not exist; run the suite first")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    pols = list(dict.fromkeys(r["policy"] for r in rows))
    worlds = {w.name: w for w in suite.worlds if any(r["world"] == w.name for r in rows)}
    done = {(r["world"], r["seed"]) for r in rows}
    seeds_ = sorted(s for s in {r["seed"] for r in rows} if all((w, s) in done for w in worlds)
                    and all(sum(1 for r in rows if r["world"] == w and r["seed"] == s) == len(pols) for w in worlds))
    if not seeds_:
        raise ConfigError(f"--table-only: no seed in {path} finished on every world")
    metrics = {w: [RunMetrics.model_validate({k: v for k, v in r.items() if k != "world"}) for r in rows
                   if r["world"] == w and r["seed"] in seeds_] for w in worlds}
    return write_suite_table(suite, worlds, metrics, pols, seeds_, seed_range, float("nan"), out, console)


def write_suite_table(suite, worlds: dict, metrics: dict, pols: list[str], seeds_: list[int], seed_range: str,
                      took: float, out: Path, console: Console) -> list:
    from ahe.simulate.suite import markdown, summarize, world_rows

    rows = [r for w in worlds for r in world_rows(w, sorted(metrics[w], key=lambda m: m.seed), pols)]
    summary = summarize(rows, pols)
    text = markdown(suite, rows, summary, seeds_, seed_range, took)
    console.print(text, markup=False, highlight=False, soft_wrap=True)
    (out / "suite.md").write_text(text, encoding="utf-8")
    (out / "suite.json").write_text(json.dumps({
        "suite": suite.name, "seed_range": seed_range, "seeds": seeds_, "policies": pols, "seconds": round(took, 1),
        "worlds": {w: json.loads(sc.model_dump_json()) for w, sc in worlds.items()},
        "rows": [r.model_dump() for r in rows], "summary": [s.model_dump() for s in summary]}, indent=1), encoding="utf-8")
    return rows
