"""The tree's budget rule (ahe.evolution.tree_budget) on numbers: children a round affords, the
binding budget, the branches stopped for their value per unit, whether the merge still fits."""

from __future__ import annotations

import math
import random

import pytest

from ahe.evolution.tree_budget import Spend, allocate, value_per_unit
from ahe.evolution.tree_choice import TreeNode, choose_expansions, expected_improvement


def _n(nid: str, mean: float, sd: float, **kw) -> TreeNode:
    return TreeNode(id=nid, mean=mean, sd=sd, **kw)


def test_a_child_costs_an_evolve_call_and_an_evaluation_round_and_the_next_line_rollout_is_kept_free():
    s = Spend(unit="tokens (total)", left=100_000, evolve_call=10_000, evaluation=20_000, reserve=20_000)
    assert s.child == 30_000
    assert s.affordable() == 2  # (100k - 20k) / 30k
    assert Spend(unit="u", left=19_999, evolve_call=0, evaluation=10_000, reserve=10_000).affordable() == 0
    assert Spend(unit="u", left=-5, evolve_call=1, evaluation=1).affordable() == 0  # overspent
    assert Spend(unit="dollars (evolve)", left=3.0, evolve_call=0, evaluation=0).affordable() >= 10**6  # costs nothing here


def test_the_binding_budget_is_the_one_that_affords_fewest_and_the_children_are_spread_over_the_rounds_left():
    nodes = [_n("node-000", 0.4, 0.1)]
    tokens = Spend(unit="tokens (total)", left=1_000_000, evolve_call=10_000, evaluation=20_000)  # 33 children
    dollars = Spend(unit="dollars (total)", left=10.0, evolve_call=1.0, evaluation=1.0)  # 5 children
    a = allocate(nodes, [tokens, dollars], width=4, rounds_left=3)
    assert (a.unit, a.affordable, a.slots) == ("dollars (total)", 5, 2)  # ceil(5 / 3) = 2, not 4 now and 1 at the end
    assert allocate(nodes, [dollars], width=4, rounds_left=1).slots == 4  # the last round may take them all (width caps)
    assert allocate(nodes, [dollars], width=8, rounds_left=1).slots == 5
    one = Spend(unit="u", left=30.0, evolve_call=10, evaluation=20)
    assert allocate(nodes, [one], width=2, rounds_left=3).slots == 1


def test_nothing_affordable_makes_no_child_and_no_merge():
    a = allocate([_n("node-000", 0.5, 0.1)], [Spend(unit="u", left=25.0, evolve_call=10, evaluation=20)], width=2, rounds_left=2)
    assert a.slots == 0 and a.affordable == 0 and a.merge is False and a.stopped == {}


def test_without_a_budget_the_round_makes_width_children_and_stops_nothing():
    nodes = [_n("node-000", 0.9, 0.01), _n("node-001", 0.1, 0.01)]
    a = allocate(nodes, [], width=3, rounds_left=1)
    assert a.slots == 3 and a.unit is None and a.stopped == {} and a.merge


def test_a_branch_whose_gain_per_unit_is_below_a_quarter_of_the_best_branchs_is_stopped_the_best_never():
    nodes = [_n("node-000", 0.40, 0.05), _n("node-001", 0.70, 0.05), _n("node-002", 0.66, 0.08),
             _n("node-003", 0.30, 0.2, pruned=True)]
    spend = Spend(unit="tokens (agent)", left=100_000, evolve_call=0, evaluation=10_000)
    value = value_per_unit(nodes, spend.child)
    assert set(value) == {"node-000", "node-001", "node-002"}  # a pruned node has no value
    assert value["node-001"] == pytest.approx(expected_improvement(0.70, 0.05, 0.70) / 10_000)
    assert value["node-001"] == pytest.approx(0.05 / math.sqrt(2 * math.pi) / 10_000)
    # node-002: EI(0.66, 0.08, 0.70) = 0.0157 > 0.25 * 0.0199; node-000: 3e-11 -> stopped
    assert value["node-002"] > 0.25 * value["node-001"] > value["node-000"]
    a = allocate(nodes, [spend], width=2, rounds_left=2)
    assert a.slots == 2 and list(a.stopped) == ["node-000"]
    why = a.stopped["node-000"]
    assert "per tokens (agent)" in why and "below 0.25 of the best branch's (node-001:" in why
    # a stricter share stops node-002 too; the best branch is never stopped
    assert sorted(allocate(nodes, [spend], width=2, rounds_left=2, stop_share=0.9).stopped) == ["node-000", "node-002"]
    assert allocate([nodes[0]], [spend], width=2, rounds_left=2).stopped == {}


def test_a_stopped_node_is_never_expanded():
    nodes = [_n("node-000", 0.5, 0.2, stopped=True), _n("node-001", 0.4, 0.2)]
    for rule in ("ei", "thompson"):
        assert choose_expansions(nodes, 3, random.Random(0), rule=rule) == ["node-001"] * 3


def test_the_merge_is_tried_only_when_one_more_evaluation_round_fits_after_the_children():
    nodes = [_n("node-000", 0.5, 0.1)]
    room = Spend(unit="u", left=90.0, evolve_call=10, evaluation=20, reserve=20)
    a = allocate(nodes, [room], width=2, rounds_left=1)
    assert a.slots == 2 and a.merge is False  # 90 - 20 (reserve) - 2 x 30 = 10 < 20
    assert allocate(nodes, [room.model_copy(update={"left": 100.0})], width=2, rounds_left=1).merge is True  # 20 left


def _score(it: int, tokens: dict, cost: dict, variants: int = 0):
    from ahe.run_folder import IterationScore

    return IterationScore(iteration=it, harness_commit=None, harness_tag=None, pass_at_1=0.5, pass_at_k=0.5, k=2, n_trials=6,
                          n_passed=3, infra_errors=0, tokens=tokens, cost_usd=cost, variant_tokens=variants)


def test_each_budget_is_priced_in_its_own_unit_from_what_the_run_spent(tmp_path):
    from types import SimpleNamespace

    from ahe.config import ExperimentConfig
    from ahe.evolution.bill import Bill, save_bill
    from ahe.evolution.forecast_sources import default_costs
    from ahe.evolution.tree.budget import spends
    from ahe.run_folder import RunFolder, Scores

    (tmp_path / "t").mkdir()
    run = RunFolder(tmp_path / "run")
    run.root.mkdir()
    save_bill(run, Bill(costs=default_costs("one-shot")))
    run.save_scores(Scores(iterations=[
        _score(1, {"agent": 9000, "debugger": 3000, "evolve": 40000}, {"agent": 0.9, "debugger": 0.3, "evolve": 2.0}),
        _score(2, {"agent": 3000, "debugger": 1000}, {"agent": 0.3, "debugger": 0.1})]))
    for c in ("c1", "c2"):  # round 1 made two evolve calls
        (run.root / "iterations" / "001" / "tree" / c / "evolve").mkdir(parents=True)
        (run.root / "iterations" / "001" / "tree" / c / "evolve" / "manifest.json").write_text("{}")
    cfg = ExperimentConfig(tasks=tmp_path / "t", search="tree",
                           budgets={"max_tokens": {"evolve": 100_000}, "max_cost_usd": {"total": 5.0}})
    tokens, dollars = spends(SimpleNamespace(cfg=cfg, run=run), 2)
    # evolve tokens: 60,000 left, 20,000 a call (40,000 over 2 calls); the evaluation and the line cost no evolve tokens
    assert (tokens.unit, tokens.left, tokens.evolve_call, tokens.evaluation, tokens.reserve) == ("tokens (evolve)", 60_000, 20_000, 0, 0)
    assert tokens.affordable() == 3
    # dollars in total: 5 - 3.6 spent; a call $1, the child's round $0.3 (this round's line rollout), kept $0.3 + $0.1 debugger
    assert dollars.unit == "dollars (total)"
    assert (dollars.left, dollars.evolve_call, dollars.evaluation, dollars.reserve) == pytest.approx((1.4, 1.0, 0.3, 0.4))
    assert dollars.affordable() == 0
    a = allocate([_n("node-000", 0.5, 0.1)], [tokens, dollars], width=2, rounds_left=2)
    assert (a.slots, a.unit) == (0, "dollars (total)")
    assert spends(SimpleNamespace(cfg=ExperimentConfig(tasks=tmp_path / "t", search="tree"), run=run), 2) == []  # no budget


def test_the_check_ahead_leaves_the_trees_evolve_calls_and_children_to_the_tree(tmp_path):
    from ahe.config import ExperimentConfig
    from ahe.evolution.bill import budget_ahead
    from ahe.run_folder import Scores

    (tmp_path / "t").mkdir()
    cfg = ExperimentConfig(tasks=tmp_path / "t", search="tree", budgets={"max_tokens": {"total": 60_000}})
    # iteration 1: rollout 6,000 + children 20,000 agent, 20,000 evolve; iteration 2's rollout 6,000
    scores = Scores(iterations=[_score(1, {"agent": 26000, "evolve": 20000}, {}, variants=20000), _score(2, {"agent": 6000}, {})])
    assert "would be reached by iteration 2's edits" in budget_ahead(cfg, scores, 2, 0.0)  # 52,000 + 20,000 + 20,000 + 6,000
    assert budget_ahead(cfg, scores, 2, 0.0, search_allocates=True) is None  # 52,000 + 6,000: the tree fits the rest


def test_one_sentence_for_a_spent_token_or_dollar_budget_wherever_it_is_checked():
    """ahe.evolution.budget_spent.spent_budget: what the loop's check after a phase, a tree round's
    crossing (RoundSpend.crossed) and the tree's finalists say, from scores.json's totals (with their
    `total`) or a round's running count (without)."""
    from ahe.config import Budgets
    from ahe.evolution.budget_spent import spent_budget
    from ahe.evolution.tree.archive import RoundRecord
    from ahe.evolution.tree.crossing import RoundSpend

    b = Budgets(max_tokens={"agent": 18000, "total": 60000}, max_cost_usd={"evolve": 2.5})
    run = {"tokens": {"agent": 21302, "evolve": 30000}, "cost_usd": {"evolve": 1.0}}
    said = "token budget of agent (18,000) reached: 21,302 spent, 3,302 over"
    assert spent_budget(b, run) == said
    assert spent_budget(b, {**run, "tokens": {**run["tokens"], "total": 51302}}) == said  # a `total` key is not counted twice
    assert spent_budget(b, run, roles=("evolve",)) is None  # 51,302 of total, $1.00 of evolve: neither reached
    over = {"tokens": {"agent": 1000, "evolve": 60000}, "cost_usd": {"evolve": 3.0}}
    assert spent_budget(b, over, roles=("evolve",)) == "token budget of total (60,000) reached: 61,000 spent, 1,000 over"
    cost = Budgets(max_cost_usd={"evolve": 2.5})
    assert spent_budget(cost, over) == "cost budget of evolve ($2.50) reached: $3.00 spent, $0.50 over"
    assert spent_budget(cost, over, roles=("agent",)) is None  # a budget of another role does not count the agent
    spend = RoundSpend(budgets=b, spent={"tokens": dict(run["tokens"]), "cost_usd": {}}, rec=RoundRecord(iteration=1))
    assert spend.crossed("agent") == said and spend.crossed("evolve") is None  # the round says the loop's sentence
