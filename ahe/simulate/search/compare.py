"""`ahe simulate --search`: `tree` against `line` at equal rollout budgets (docs/search-simulator.md).

Per world and seed: `line` is the simulator's line — `ahe.simulate.search.tree.TreeSearch` with
one full round per evolve call from the current harness, judged by the same expected-value
functions — at the world's iterations (1×) and at twice as many (2×); every tree search then
gets exactly the budget that line spent, in one currency (every rollout and re-evaluation, and
every evolve call at `PRICE` trials), and draws its proposals from the same function. It is not the product's loop (`run_one`): that line is
stronger and about 150 s per seed, too slow for the table (docs/search-simulator.md says so). Tree worlds
(`worlds/*.yaml`) propose from the parent; the standard suite's worlds (`suites/standard`) hand
out their stream — evolve call n gets iteration n's changes whatever the parent.

Reported per world, strategy and budget: the true pass@1 gain of the harness returned over the
seed (mean and 95 % interval over seeds), the paired difference to line, the share of the
best reachable harness it captured, evolve calls and trials. `--search holdout`: the tree worlds of
`worlds/holdout/`, written after the strategy was frozen (never tuned on); `--search holdout2`: those of
`worlds/holdout2/`, written after the 7 Dec strategy (file merges, tree-mix) froze; `--search holdout3`:
those of `worlds/holdout3/`, written before any search ran on them and first run after `tree-drop` froze;
`--search holdout4`: those of `worlds/holdout4/`, written after `tree-line` froze (commit 66790f9).
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import yaml

from ahe.evolution.forecast_sources import DEFAULTS
from ahe.simulate.scenario import Scenario
from ahe.simulate.search.product_tree import ProductSettings, ProductTree
from ahe.simulate.search.tree import TreeSearch, TreeSettings
from ahe.simulate.search.tree_world import TreeScenario, make_tree_world

WORLDS = Path(__file__).resolve().parent / "worlds"
STANDARD = Path(__file__).resolve().parents[1] / "suites" / "standard"
# the frozen tree strategy (tuned on development seeds, docs/search-simulator.md)
# one currency: an evolve call costs what AHE's stated defaults say an evolve session costs against
# one trial of a one-shot task (ahe.evolution.forecast_sources: 1.54M tokens / 0.41M, about 3.7 trials)
PRICE = round(DEFAULTS["one-shot"]["evolve"].tokens / DEFAULTS["one-shot"]["agent"].tokens, 2)
LINE = TreeSettings(select="line", eval_share=1.0, final_top=0, call_price=PRICE)
STRATEGIES = {
    "tree-ei": TreeSettings(select="ei", eval_share=0.05, final_share=0.1, call_price=PRICE),
    # the 7 Dec evening strategy (development seeds 0-29, docs/search-simulator.md): tree-ei, and after every fifth
    # evolve call a rollback child of the best estimate without its least convincing change (the loop's rollback)
    "tree-drop": TreeSettings(select="ei", eval_share=0.05, final_share=0.1, call_price=PRICE, drop_every=5),
    # frozen 7 Dec 18:1x (development seeds 0-29 of the tree worlds, 0-9 of the present suite, docs/search-simulator.md):
    # tree-drop, and after every fourth evolve call the product's line round: a full round on the best estimate,
    # each change on its path re-judged over every round it ran (every task), the failing ones rolled back
    "tree-line": TreeSettings(select="ei", eval_share=0.05, final_share=0.1, call_price=PRICE, drop_every=5, line_every=4, line_all=True),
}
# tree-drop and tree-line draw tree-ei's samples (a harness evaluated by each sees the same trials): they are paired
SAMPLES = {"tree-drop": "tree-ei", "tree-line": "tree-ei", "tree-product": "tree-ei"}
# the product's own `search: tree` (ahe.evolution.tree) mirrored: the same iterations as line and line's spend as its budget
PRODUCT = {"tree-product": ProductSettings(call_price=PRICE)}
# measured on 7 Dec (docs/search-simulator.md) and no longer run by `ahe simulate --search`: Thompson, and EI then Thompson
EARLIER = {
    "tree-ts": TreeSettings(select="thompson", eval_share=0.05, final_share=0.1, call_price=PRICE),
    "tree-mix": TreeSettings(select="ei", thompson_after=10, eval_share=0.05, final_share=0.1, call_price=PRICE),
}
HOLDOUTS = ("holdout", "holdout2", "holdout3", "holdout4")
STREAM = 6  # a stream world's changes: this many times its iterations (evolve call n gets iteration n's)


def load_worlds(which: str) -> list[tuple[str, Scenario]]:
    """(kind, scenario) for `tree`, `standard`, `all` (those two), `holdout`, `holdout2`, `holdout3` or `holdout4` (tree worlds
    written after a strategy froze: `holdout` before the 7 Dec change, `holdout2` after it, `holdout3` first run
    after `tree-drop` froze, `holdout4` written after `tree-line` froze, docs/search-simulator.md)."""
    out: list[tuple[str, Scenario]] = []
    if which in ("tree", "all", *HOLDOUTS):
        where = WORLDS / which if which.startswith("holdout") else WORLDS
        out += [("tree", TreeScenario.model_validate(yaml.safe_load(p.read_text()))) for p in sorted(where.glob("*.yaml"))]
    if which in ("standard", "all"):
        out += [("stream", Scenario.model_validate(yaml.safe_load(p.read_text()))) for p in sorted(STANDARD.glob("*.yaml"))]
    return out


def _line(sc: Scenario, world, evolve, mult: int, scratch: Path) -> dict:
    from ahe.simulate.runner import run_one, write_tasks

    tasks = write_tasks(scratch / "tasks", len(world.base))
    run = scratch / f"line-{mult}x"
    try:
        m = run_one(sc.model_copy(update={"iterations": sc.iterations * mult}), world, "expected-value", run, tasks, evolve=evolve)
    finally:
        shutil.rmtree(run, ignore_errors=True)
    return {"gain": m.best_true - m.seed_true, "trials": m.rollouts, "evolve_calls": sc.iterations * mult}


def tree_proposer(world):
    """A tree world's evolve agent as the searches call it: (parent's markers, nth child, step) -> changes."""
    def propose(markers, nth, step):
        return [(c.uid, c.predicted_fixes + c.predicted_regressions) for c in world.propose(markers, nth)]
    return propose


def sim_line(world, k: int, seed: int, propose, calls: int):
    """The line in the search's machinery: a full round per evolve call, the same verdict rule."""
    return TreeSearch(world.p, list(world.base), k, f"{seed}:line", LINE).run(propose, 10**9, max_calls=calls)


def _search_row(world, r, seed_true: float, **extra) -> dict:
    return {"gain": world.pass_at_1(set(r.markers)) - seed_true, "trials": r.trials, "cost": r.cost,
            "evolve_calls": r.expansions, "nodes": len(r.nodes), "pruned": r.pruned, **extra}


def one_seed(kind: str, sc_json: str, seed: int, scratch: str, real_line: bool = False, mults: tuple[int, ...] = (1, 2)) -> dict:
    """Worker: line at 1× and 2× (or `mults`), then every search at each of those budgets."""
    from ahe.simulate.search.evolve import ParentAwareEvolve
    from ahe.simulate.world import make_world

    if kind == "tree":
        sc = TreeScenario.model_validate_json(sc_json)
        world = make_tree_world(sc, seed)
        reachable = world.pass_at_1(set(world.best))
        propose = tree_proposer(world)
        evolve = lambda: ParentAwareEvolve(world)  # noqa: E731
    else:
        sc = Scenario.model_validate_json(sc_json)
        world = make_world(sc.model_copy(update={"iterations": STREAM * sc.iterations}), seed)  # the 1× stream is its prefix
        reachable = world.pass_at_1(world.oracle_markers())

        def propose(markers, nth, step):
            return [(c.uid, c.predicted_fixes + c.predicted_regressions) for c in world.changes.values() if c.iteration == step]
        evolve = lambda: None  # noqa: E731  (the stream: ScriptedEvolve)
    seed_true = world.pass_at_1(set())
    row: dict = {"world": sc.name, "kind": kind, "seed": seed, "reachable_gain": reachable - seed_true}
    base = Path(scratch) / f"{sc.name}-{seed}"
    for mult in mults:
        calls = sc.iterations * mult
        if real_line:  # the real loop's line (slow: about 3 min a seed of a tree world on one core)
            line = _line(sc, world, evolve(), mult, base)
        else:  # the line in the search's machinery: a full round per evolve call, the same verdict rule
            r = sim_line(world, sc.k, seed, propose, calls)
            line = {"gain": world.pass_at_1(set(r.markers)) - seed_true, "trials": r.trials, "evolve_calls": r.expansions}
        line["cost"] = line["trials"] + PRICE * line["evolve_calls"]
        row[f"line@{mult}x"] = line
        for name, cfg in STRATEGIES.items():
            r = TreeSearch(world.p, list(world.base), sc.k, f"{seed}:{SAMPLES.get(name, name)}", cfg).run(
                propose, line["cost"], max_calls=None if kind == "tree" else STREAM * sc.iterations)
            row[f"{name}@{mult}x"] = _search_row(world, r, seed_true)
        for name, pcfg in PRODUCT.items():
            r = ProductTree(world.p, list(world.base), sc.k, f"{seed}:{SAMPLES.get(name, name)}", pcfg).run(propose, line["cost"], calls)
            row[f"{name}@{mult}x"] = _search_row(world, r, seed_true, rollbacks=r.rollbacks)
    shutil.rmtree(base, ignore_errors=True)
    return row


def run_compare(which: str, seeds: list[int], out: Path, jobs: int, say=print, real_line: bool = False) -> list[dict]:
    """Every (world, seed) once (OUT/rows.jsonl is resumable: a finished pair is not run again)."""
    from ahe.simulate.command import scratch_root

    out.mkdir(parents=True, exist_ok=True)
    done_file = out / "rows.jsonl"
    rows = [json.loads(x) for x in done_file.read_text().splitlines()] if done_file.exists() else []
    have = {(r["world"], r["seed"]) for r in rows}
    todo = [(k, sc, s) for k, sc in load_worlds(which) for s in seeds if (sc.name, s) not in have]
    scratch = str(scratch_root() or out)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futs = [pool.submit(one_seed, k, sc.model_dump_json(), s, os.path.join(scratch, f"ahe-simsearch-{os.getpid()}"), real_line) for k, sc, s in todo]
        for f in as_completed(futs):
            row = f.result()
            rows.append(row)
            with done_file.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            say(f"{row['world']} seed {row['seed']}: line {row['line@1x']['gain']:+.3f}, tree-ei {row['tree-ei@1x']['gain']:+.3f}")
    return rows


def search_command(which: str, out: Path | None, seeds: int, seed_range: str, jobs: int, real_line: bool, console) -> dict:
    """`ahe simulate --search WORLDS`: the table of docs/search-simulator.md, written to OUT/search.md|json."""
    import time

    from ahe.errors import ConfigError
    from ahe.simulate.search.table import markdown, summarize
    from ahe.simulate.suite import seed_list

    if which not in ("tree", "standard", "all", *HOLDOUTS):
        raise ConfigError(f"--search {which}: choose tree, standard, all, holdout, holdout2, holdout3 or holdout4")
    out = (out or Path("runs") / f"search-{which}").resolve()
    seeds_ = seed_list(seed_range, seeds)
    t0 = time.monotonic()
    rows = run_compare(which, seeds_, out, jobs, say=console.print, real_line=real_line)
    summary = summarize(sorted(rows, key=lambda r: (r["kind"], r["world"], r["seed"])))
    text = markdown(summary) + f"\n{which} worlds, {seed_range} seeds {seeds_[0]}-{seeds_[-1]}, {time.monotonic() - t0:.0f} s\n"
    (out / "search.md").write_text(text, encoding="utf-8")
    (out / "search.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    console.print(text)
    return summary
