"""Tree worlds and the tree search in the simulator (issue 36, docs/search.md)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

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
    for row in map(json.loads, (tmp_path / "rows.jsonl").read_text().splitlines()):  # one currency: trials + evolve calls
        for s in ("tree-ei", "tree-drop"):
            for b in ("1x", "2x"):
                assert row[f"{s}@{b}"]["cost"] <= row[f"line@{b}"]["cost"] + 1e-9
                assert row[f"{s}@{b}"]["cost"] == pytest.approx(row[f"{s}@{b}"]["trials"] + 3.74 * row[f"{s}@{b}"]["evolve_calls"])
    assert "tree-ei@1x" in summary["verdict"] and "| tree-ei |" in (tmp_path / "search.md").read_text()
    bad = CliRunner().invoke(app, ["simulate", "--search", "forest", "--out", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "--search forest: choose tree, standard, all, holdout, holdout2, holdout3 or holdout4" in str(bad.exception)  # one sentence, no traceback (ahe.cli.main)


def test_a_budget_of_a_few_rounds_leaves_the_tree_no_worse_than_the_line(monkeypatch) -> None:
    """tiny-demo (3 tasks, k=2, 3 rounds): the final re-evaluation sized to the budget (`final_share`) and
    evolve calls priced in the budget's currency; with two fixed final rounds the tree lost 17 points."""
    import yaml

    from ahe.simulate.scenario import Scenario
    from ahe.simulate.search import compare

    sc = Scenario.model_validate(yaml.safe_load((compare.STANDARD / "09-tiny-demo.yaml").read_text())).model_dump_json()

    def diff() -> float:
        rows = [compare.one_seed("stream", sc, s, "/nonexistent-scratch") for s in range(20)]  # development seeds
        return sum(r["tree-ei@1x"]["gain"] - r["line@1x"]["gain"] for r in rows) / len(rows)

    assert compare.STRATEGIES["tree-ei"].final_share < 1.0
    assert diff() > -0.06  # within noise of the line (the paired mean over 20 seeds)
    monkeypatch.setitem(compare.STRATEGIES, "tree-ei", compare.STRATEGIES["tree-ei"].model_copy(update={"final_share": 1.0}))
    assert diff() < -0.1  # the fix undone: two fixed final rounds leave one evolve call of line's three


def _tree_world(seed: int = 3) -> TreeWorld:
    return make_tree_world(TreeScenario(tasks={"count": 40}, tree={"pool": 24, "dead_ends": 1, "conflicts": 1}), seed)


def test_thompson_after_switches_the_rule_once_that_many_rounds_are_spent() -> None:
    w, rnd = _tree_world(), 2 * 40

    def run(**kw):
        return [n.markers for n in TreeSearch(w.p, list(w.base), 2, "s", TreeSettings(select="ei", eval_share=0.1, **kw)).run(_propose(w), 12 * rnd).nodes]

    ei, ts = run(), [n.markers for n in TreeSearch(w.p, list(w.base), 2, "s", TreeSettings(select="thompson", eval_share=0.1)).run(_propose(w), 12 * rnd).nodes]
    assert run(thompson_after=100) == ei  # never reached: plain EI
    late = run(thompson_after=4)
    assert late != ei and late != ts  # EI's archive until four rounds are spent, then Thompson's choices
    first = next(i for i, (a, b) in enumerate(zip(late, ei)) if a != b)
    assert first > 1 and late[:first] == ei[:first]


def test_branches_editing_one_component_in_different_files_merge() -> None:
    from ahe.simulate.search import tree as tree_mod

    w = _world(per_call=(1, 1))
    s = TreeSearch(w.p, T, 2, "m", TreeSettings(select="ei", eval_share=1.0))
    s.run(_propose(w), 10**6, max_calls=0)
    s.named_of = {}
    s.add(0, frozenset({"fixA"}), {T[0], T[1]})
    s.add(0, frozenset({"patch"}), {T[0]})
    assert tree_mod.component_of("fixA") == tree_mod.component_of("patch") == "tools"
    s._merge_branches(10**6)
    assert frozenset({"fixA", "patch"}) in s.seen  # one component, two files (sim/<uid>.md): git merges them


def test_a_near_miss_gets_another_look_before_it_is_rolled_back() -> None:
    w = _tree_world(5)
    plain = TreeSearch(w.p, list(w.base), 2, "r", TreeSettings(select="ei", eval_share=0.05)).run(_propose(w), 15 * 80)
    again = TreeSearch(w.p, list(w.base), 2, "r", TreeSettings(select="ei", eval_share=0.05, relook=0.05, relooks=2)).run(_propose(w), 15 * 80)
    assert not [n for n in plain.nodes[1:] if n.pruned and n.evals > 1]  # one look a rejected child (finalists get a round)
    relooked = [n for n in again.nodes[1:] if n.pruned and n.evals > 1]
    assert relooked and max(n.evals for n in again.nodes) <= 3  # a near miss looked at again, never more than relooks + 1


def _two_looks(p=lambda t, m: 0.5, again: int = 1, **kw) -> tuple[TreeSearch, object, object]:
    """Change `fixA` (names t1) proposed twice: on the seed (child 1, rejected) and on a branch that holds
    `dup` (child 2); each look saw t1 pass 1 of 2 (child 2: `again` of 2) where the seed passed 0 of 2."""
    import numpy as np

    from ahe.evolution.evidence import Counts, fit_prior
    from ahe.simulate.search.tree import Node

    s = TreeSearch(p, T, 2, "pool", TreeSettings(select="ei", **kw))
    s.nodes = [Node(0, None, frozenset(), np.array([0, 0, 0, 0, 2, 2, 2, 2.0]), np.full(8, 2.0))]
    s.prior = fit_prior([Counts(int(a), int(b)) for a, b in zip(s.nodes[0].s, s.nodes[0].n)])
    s.named_of = {"fixA": [T[0]], "dup": [T[1]]}

    def child(parent: int, markers: set[str], task: int, passed: int) -> Node:
        nd = Node(len(s.nodes), parent, frozenset(markers), np.zeros(8), np.zeros(8))
        new = nd.markers - s.nodes[parent].markers
        nd.named = np.array([any(t in s.named_of[u] for u in new) for t in T])
        nd.s[task], nd.n[task] = passed, 2
        s.nodes.append(nd)
        for u in new:
            s.looks.setdefault(u, []).append(nd.id)
        return nd

    first = child(0, {"fixA"}, 0, 1)
    first.pruned = True
    branch = child(0, {"dup"}, 1, 2)
    return s, first, child(branch.id, {"dup", "fixA"}, 0, again)


def test_a_change_rejected_once_and_proposed_again_is_judged_on_both_looks() -> None:
    alone, first, again = _two_looks()
    assert alone.p_above(first) < 0.5 and alone.p_above(again) < 0.5  # one look, 1/2 against 0/2: not enough
    pooled, first, again = _two_looks(pool=True)
    assert [n.id for n in pooled._earlier_looks(again)[0]] == [first.id]  # t1's earlier look, against its own ancestor
    assert pooled.p_above(again) > 0.5  # two looks, 2/4 against 0/4: kept
    assert pooled.judge(again, 10**6) and first.pruned  # the first child stays rolled back without `rescue`
    rescued, first, again = _two_looks(pool=True, rescue=True)
    assert rescued.judge(again, 10**6) and not first.pruned  # re-judged on both looks: reopened


def test_a_rollback_child_drops_the_least_convincing_change_and_keeps_it_only_when_it_did_something() -> None:
    def world(fix_works: bool):
        return lambda t, m: 1.0 if (t == T[0] and fix_works and "fixA" in m) or (t == T[1] and "dup" in m) or t in T[4:] else 0.0

    for works in (True, False):
        s, first, again = _two_looks(world(works), again=2 if works else 0, drop_every=1, eval_share=0.05)
        s.nodes[2].pruned = True  # the `dup` branch: the best estimate left is `again`
        s.seen = {n.markers: n.id for n in s.nodes if n.id != 2}  # (its harness unseen, so the rollback is run)
        s._drop(10**6)
        kid = s.nodes[-1]
        assert kid.parent == again.id and kid.markers == {"dup"}  # fixA: one weak look (1/2) against dup's 2/2
        assert kid.named.tolist() == [t == T[0] for t in T] and kid.n[0] == 2  # run on what fixA named
        assert kid.pruned is works  # t1 falls 2/2 -> 0/2 without it: the rollback is rejected; else kept (clutter saved)


def test_the_increment_table_says_where_line_has_flattened_and_pairs_the_seeds() -> None:
    from ahe.simulate.search.table import markdown, summarize

    def row(world: str, seed: int, line: tuple[float, float], tree: tuple[float, float]) -> dict:
        cell = lambda g: {"gain": g, "trials": 1, "evolve_calls": 1}  # noqa: E731
        return {"world": world, "kind": "tree", "seed": seed, "reachable_gain": 0.5,
                **{f"line@{m}x": cell(line[i]) for i, m in enumerate((1, 2))},
                **{f"{s}@{m}x": cell(tree[i]) for s in ("tree-ei", "tree-drop") for i, m in enumerate((1, 2))}}

    noise = (0.0, 0.02, -0.01, 0.03)
    rows = [row("flat", s, (0.05 + e, 0.05 + e), (0.08 + e, 0.12 + e)) for s, e in enumerate(noise)]
    rows += [row("rising", s, (0.05 + e, 0.10 + e), (0.08 + e, 0.09 + e)) for s, e in enumerate(noise)]
    inc = {r["world"]: r for r in summarize(rows)["increments"]}
    assert inc["flat"]["line_flat"] and not inc["rising"]["line_flat"]
    assert inc["flat"]["tree-drop-line"][0] == pytest.approx(0.04) and inc["flat"]["tree-drop-line"][1] == pytest.approx(0.04)  # paired: the seeds' noise cancels
    assert "| flat | 1x→2x | +0.0 [+0.0, +0.0] | yes |" in markdown(summarize(rows))


def test_the_longer_run_adds_a_budget_and_reports_each_step(tmp_path: Path) -> None:
    from ahe.simulate.search.longer import main

    main(["--worlds", "tree", "--seeds", "0-0", "--budgets", "1,3", "--out", str(tmp_path)])
    rows = [json.loads(x) for x in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(f"tree-drop@{m}x" in r and f"line@{m}x" in r and "line@2x" not in r for r in rows for m in (1, 3))
    assert all(r["line@3x"]["evolve_calls"] == 3 * r["line@1x"]["evolve_calls"] for r in rows)
    assert all(r["tree-drop@3x"]["cost"] <= r["line@3x"]["cost"] + 1e-9 for r in rows)
    text = (tmp_path / "search.md").read_text()
    assert "| dead-ends | 1x→3x |" in text and "| tree-drop@3x |" in text


def test_the_line_round_re_judges_each_kept_change_on_every_round_and_rolls_back_the_failing_ones() -> None:
    def world(fix_works: bool):
        return lambda t, m: 1.0 if (t == T[0] and fix_works and "fixA" in m) or (t == T[1] and "dup" in m) or t in T[4:] else 0.0

    for works in (True, False):
        s, first, again = _two_looks(world(works), line_every=1, eval_share=0.05)
        s.nodes[2].pruned = True  # the `dup` branch: the best estimate left is `again` (dup, then fixA on it)
        s.seen = {n.markers: n.id for n in s.nodes if n.id != 2}
        n_before = again.n.copy()
        s._line_round(10**6)
        assert (again.n == n_before + 2).all()  # a full round on the line's harness, pooled with its look
        if works:  # t1: 1/2 + 2/2 against the seed's 0/2; dup's t2 2/2 against 0/2: both kept, no rollback
            assert s.nodes[-1] is again
        else:  # fixA's t1 now 1/4 against 0/2: it fails and leaves; dup stays
            kid = s.nodes[-1]
            assert kid.parent == again.id and kid.markers == {"dup"} and not kid.pruned


def test_a_search_with_line_rounds_stays_in_budget_and_runs_them() -> None:
    w = _tree_world(5)
    r = TreeSearch(w.p, list(w.base), 2, "l", TreeSettings(select="ei", eval_share=0.05, final_share=0.1, line_every=2)).run(_propose(w), 15 * 80)
    plain = TreeSearch(w.p, list(w.base), 2, "l", TreeSettings(select="ei", eval_share=0.05, final_share=0.1)).run(_propose(w), 15 * 80)
    assert r.cost <= 15 * 80 and r.expansions < plain.expansions  # the rounds are paid from the same budget
    assert sum(n.evals >= 2 and n.n.min() >= 4 for n in r.nodes[1:]) >= 2  # more than one node given a full round (or more)


def test_a_line_round_on_every_task_keeps_a_fix_its_manifest_did_not_name() -> None:
    works = lambda t, m: 1.0 if (t == T[0] and "fixA" in m) or (t == T[1] and "dup" in m) or t in T[4:] else 0.0  # noqa: E731
    for every_task in (False, True):
        s, first, again = _two_looks(works, again=2, line_every=1, line_all=every_task, eval_share=0.05)
        s.named_of["fixA"] = [T[2]]  # the manifest names t3; the fix is on t1
        s.nodes[2].pruned = True
        s.seen = {n.markers: n.id for n in s.nodes if n.id != 2}
        s._line_round(10**6)
        rolled_back = s.nodes[-1] is not again and s.nodes[-1].markers == {"dup"}
        assert rolled_back is not every_task  # named tasks only: t3 never moved, fixA leaves; every task: t1 4/4 against 0/2 keeps it


def test_a_rejected_harness_proposed_again_gets_another_look_and_saturation_triggers_line_rounds() -> None:
    w, budget = _tree_world(5), 30 * 80
    cfg = dict(select="ei", eval_share=0.05, final_share=0.1)
    plain = TreeSearch(w.p, list(w.base), 2, "a", TreeSettings(**cfg)).run(_propose(w), budget)
    again = TreeSearch(w.p, list(w.base), 2, "a", TreeSettings(**cfg, again=2)).run(_propose(w), budget)
    looked = lambda r: [n for n in r.nodes[1:] if n.evals > 1 and n.n.min() == 0]  # noqa: E731  (more looks, never a full round)
    assert not looked(plain) and looked(again) and max(n.evals for n in looked(again)) <= 3
    stale = TreeSearch(w.p, list(w.base), 2, "a", TreeSettings(**cfg, line_stale=2)).run(_propose(w), budget)
    full = lambda r: sum(n.n.min() > 0 for n in r.nodes)  # noqa: E731
    assert stale.cost <= budget and full(stale) > full(plain) + 1  # proposals already tried elsewhere: line rounds instead
