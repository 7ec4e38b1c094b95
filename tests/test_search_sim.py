"""Tree worlds and the tree search in the simulator (issue 36, docs/search.md)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from ahe.config import AttributionSettings, DebuggerSettings, ExperimentConfig
from ahe.evolution.loop import EvolutionLoop
from ahe.simulate.executor import SimulatedExecutor
from ahe.simulate.runner import write_tasks
from ahe.simulate.search.evolve import ParentAwareEvolve
from ahe.simulate.search.tree import TreeSearch, TreeSettings
from ahe.simulate.search.tree_world import PoolChange, TreeScenario, TreeWorld, best_reachable, make_tree_world
from ahe.simulate.world import task_names

T = task_names(8)


def _world(per_call=(1, 1), seed: int = 0) -> TreeWorld:
    """t1-t4 fail, t5-t8 pass. `patch` gains t1 (0.8), claims t1-t4 and blocks `fixA`, `fixB` (the dead end);
    `fixB` needs `tool`; `dup` conflicts with `fixA`."""
    w = TreeWorld(seed=seed, cap=1.0, per_call=per_call, base={t: (0.0 if i < 4 else 1.0) for i, t in enumerate(T)})
    for c in (PoolChange(uid="patch", kind="dead-end", effects={T[0]: 0.8}, predicted_fixes=T[:4], blocks=["fixA", "fixB"]),
              PoolChange(uid="fixA", kind="beneficial", effects={T[0]: 1.0, T[1]: 1.0}, predicted_fixes=[T[0], T[1]]),
              PoolChange(uid="fixB", kind="beneficial", effects={T[2]: 1.0, T[3]: 1.0}, predicted_fixes=[T[2]], requires="tool"),
              PoolChange(uid="tool", kind="enabler", predicted_fixes=[T[2], T[3]]),
              PoolChange(uid="dup", kind="beneficial", effects={T[1]: 0.5}, predicted_fixes=[T[1]], conflicts=["fixA"])):
        w.changes[c.uid] = c
    w.changes["fixA"].conflicts = ["dup"]
    return w


def test_effects_interact_dead_ends_prerequisites_conflicts_and_diminishing_returns() -> None:
    w = _world()
    assert w.p(T[0], {"fixA"}) == 1.0 and w.p(T[0], {"patch", "fixA"}) == 0.8  # the patch blocks the real fix
    assert w.p(T[2], {"fixB"}) == 0.0 and w.p(T[2], {"fixB", "tool"}) == 1.0  # no gain without its enabler
    assert w.p(T[1], {"fixA", "dup"}) == 0.0 < w.p(T[1], {"dup"})  # conflicting gains cancel
    w.changes["dup"].conflicts, w.changes["fixA"].conflicts = [], []
    w.changes["fixA"].effects[T[1]] = 0.5
    assert abs(w.p(T[1], {"fixA", "dup"}) - 0.75) < 1e-9  # two halves of the headroom: 0.75, not 1.0
    assert best_reachable(_world()) == {"fixA", "fixB", "tool"}


def test_proposals_follow_the_parents_failing_tasks_and_repeat_for_the_same_parent() -> None:
    w = _world()
    assert [c.uid for c in w.propose(frozenset(), 0)] == [c.uid for c in w.propose(frozenset(), 0)]
    fixed = frozenset({"fixA", "fixB", "tool"})  # t1-t4 pass: what claims them has lost its pull
    draws = [c.uid for n in range(200) for c in w.propose(frozenset(), n)]
    after = [c.uid for n in range(200) for c in w.propose(fixed, n)]
    assert set(after) == {"patch", "dup"}
    assert all(c.uid not in fixed for n in range(50) for c in w.propose(fixed, n))  # never what the parent holds
    assert sum(u == "patch" for u in draws) > sum(u == "dup" for u in draws)  # four failing tasks claimed, not one


def test_a_generated_world_holds_every_interaction_and_its_best_beats_the_seed() -> None:
    w = make_tree_world(TreeScenario(tasks={"count": 40}, tree={"pool": 20, "dead_ends": 1, "conflicts": 1, "prerequisites": 0.3}), 5)
    kinds = {c.kind for c in w.changes.values()}
    assert {"dead-end", "enabler"} <= kinds and any(c.conflicts for c in w.changes.values())
    assert w.pass_at_1(set(w.best)) > w.pass_at_1(set()) + 0.02
    assert make_tree_world(TreeScenario(tasks={"count": 40}, tree={"pool": 20}), 5).model_dump() == \
        make_tree_world(TreeScenario(tasks={"count": 40}, tree={"pool": 20}), 5).model_dump()


def _propose(w: TreeWorld):
    return lambda markers, nth, step: [(c.uid, c.predicted_fixes + c.predicted_regressions) for c in w.propose(markers, nth)]


def test_the_tree_leaves_the_dead_end_the_line_keeps_within_the_same_budget() -> None:
    w = _world(per_call=(1, 2))
    budget = 8 * 2 * 12
    line = TreeSearch(w.p, T, 2, "x", TreeSettings(select="line", eval_share=1.0)).run(_propose(w), budget)
    tree = TreeSearch(w.p, T, 2, "x", TreeSettings(select="ei", eval_share=0.25)).run(_propose(w), budget)
    assert line.trials <= budget and tree.trials <= budget  # every trial counted, the final re-evaluation too
    assert [c.uid for c in w.propose(frozenset(), 0)] == ["patch"]  # the first proposal is the dead end
    assert "patch" in line.markers and w.pass_at_1(set(line.markers)) < w.pass_at_1(set(tree.markers))
    assert {"fixA", "fixB", "tool"} <= tree.markers and "patch" not in tree.markers
    assert tree.pruned >= 1  # the branches under the patch can no longer win
    harnesses = [n.markers for n in tree.nodes]
    assert len(harnesses) == len(set(harnesses))  # a harness already in the archive is never evaluated again


def test_the_real_loop_proposes_from_the_harness_it_kept(tmp_path: Path) -> None:
    w = _world(per_call=(2, 2))
    cfg = ExperimentConfig(tasks=write_tasks(tmp_path / "tasks", len(T)), iterations=2, k=2, concurrency=1, retry_infra=0,
                           attribution=AttributionSettings(strictness="paper"), debugger=DebuggerSettings(enabled=False))
    evolve = ParentAwareEvolve(w)
    loop = EvolutionLoop(cfg, tmp_path / "run", executor=SimulatedExecutor(w), evolve=evolve)  # type: ignore[arg-type]
    asyncio.run(loop.run_loop(loop.prepare(resume=False), {}))
    first = json.loads((tmp_path / "run/iterations/001/evolve/manifest.json").read_text())
    second = json.loads((tmp_path / "run/iterations/002/evolve/manifest.json").read_text())
    assert [Path(c["files"][0]).stem for c in first["changes"]] == [c.uid for c in w.propose(frozenset(), 0)]
    from ahe.simulate.metrics import _markers_at

    parent = frozenset(_markers_at(tmp_path / "run" / "workspace", second["base_commit"]))  # what round 1's verdicts left
    nth = 1 if not parent else 0  # all rolled back: the seed again, its second proposal
    assert [Path(c["files"][0]).stem for c in second["changes"]] == [c.uid for c in w.propose(parent, nth)]
    assert sum(evolve.seen.values()) == 2


def test_ahe_simulate_search_writes_the_table_and_refuses_an_unknown_world_set(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from ahe.cli import app

    res = CliRunner().invoke(app, ["simulate", "--search", "tree", "--seeds", "1", "--seed-range", "dev", "--jobs", "1", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "search.json").read_text())
    cells = summary["cells"]
    assert {c["world"] for c in cells} == {"dead-ends", "prerequisites", "conflicts-diminishing"}
    assert all(c["trials"] <= next(d["trials"] for d in cells if d["world"] == c["world"] and d["budget"] == c["budget"]
                                   and d["strategy"] == "line") for c in cells)  # no strategy spends more than line
    assert "tree-ei@1x" in summary["verdict"] and "| tree-ei |" in (tmp_path / "search.md").read_text()
    bad = CliRunner().invoke(app, ["simulate", "--search", "forest", "--out", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "--search forest: choose tree, standard or all" in str(bad.exception)  # one sentence, no traceback (ahe.cli.main)
