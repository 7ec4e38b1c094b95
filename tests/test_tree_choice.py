"""The tree search's pure choices (ahe/evolution/tree_choice.py): expansion by expected
improvement or Thompson draws, pruning of nodes that cannot win, the finalists."""

from __future__ import annotations

import random

from ahe.evolution.tree_choice import TreeNode, choose_expansions, expected_improvement, finalists, prunable


def _nodes() -> list[TreeNode]:
    return [TreeNode(id="n0", mean=0.40, sd=0.02), TreeNode(id="n1", mean=0.55, sd=0.05, parent="n0"),
            TreeNode(id="n2", mean=0.30, sd=0.01, parent="n0"), TreeNode(id="n3", mean=0.50, sd=0.20, parent="n0")]


def test_expected_improvement_matches_its_closed_form_limits() -> None:
    assert abs(expected_improvement(0.6, 0.0, 0.5) - 0.1) < 1e-12
    assert expected_improvement(0.4, 0.0, 0.5) == 0.0
    # an uncertain node below the best still has value; more uncertainty, more value
    assert 0 < expected_improvement(0.45, 0.05, 0.5) < expected_improvement(0.45, 0.2, 0.5)


def test_ei_prefers_the_uncertain_challenger_over_the_sure_loser() -> None:
    order = choose_expansions(_nodes(), 3, random.Random(0), rule="ei")
    assert order[0] == "n3"  # 0.50 ± 0.20 beats 0.55 ± 0.05 on expected improvement over 0.55
    assert "n2" not in order[:2]


def test_thompson_is_deterministic_given_the_rng_and_spreads_over_live_nodes() -> None:
    a = choose_expansions(_nodes(), 3, random.Random(7))
    assert a == choose_expansions(_nodes(), 3, random.Random(7))
    assert len(set(a)) == 3  # one draw per slot without replacement while live nodes last
    counts = {n: 0 for n in ("n0", "n1", "n2", "n3")}
    rng = random.Random(1)
    for _ in range(400):
        counts[choose_expansions(_nodes(), 1, rng)[0]] += 1
    assert counts["n2"] == 0 and counts["n1"] > counts["n0"]  # the sure loser is never drawn first


def test_pruned_and_exhausted_nodes_are_never_expanded_and_no_live_node_means_no_slot() -> None:
    nodes = _nodes()
    nodes[1] = nodes[1].model_copy(update={"pruned": True})
    nodes[3] = nodes[3].model_copy(update={"exhausted": True})
    assert set(choose_expansions(nodes, 4, random.Random(0))) <= {"n0", "n2"}
    dead = [n.model_copy(update={"pruned": True}) for n in nodes]
    assert choose_expansions(dead, 2, random.Random(0)) == [] and choose_expansions(nodes, 0, random.Random(0)) == []


def test_prunable_is_the_nodes_that_cannot_reach_the_best_and_never_the_best() -> None:
    assert prunable(_nodes()) == {"n0", "n2"}  # 0.40 + 3·0.02 and 0.30 + 3·0.01 are below 0.55
    assert prunable(_nodes(), z=10.0) == {"n2"}
    assert "n1" not in prunable(_nodes(), z=0.0)


def test_finalists_are_the_best_estimates_unpruned_first() -> None:
    nodes = _nodes()
    assert finalists(nodes, 2) == ["n1", "n3"]
    nodes[1] = nodes[1].model_copy(update={"pruned": True})
    assert finalists(nodes, 2) == ["n3", "n0"] and finalists(nodes, 0) == []
