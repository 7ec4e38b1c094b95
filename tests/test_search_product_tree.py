"""The product's `search: tree` mirrored in the simulator (ahe.simulate.search.product_tree, docs/search.md)."""

from __future__ import annotations

from ahe.simulate.search.product_tree import ProductSettings, ProductTree
from ahe.simulate.search.tree_world import TreeScenario, make_tree_world

T = [f"t{i}" for i in range(1, 9)]
K = 4
ROUND = K * len(T)


def p(task: str, markers: set) -> float:
    """t1-t4 fail (0.1), t5-t8 pass (0.9); `good` fixes t1-t4, `bad` breaks t5-t8, `meh` does nothing."""
    i = T.index(task)
    if i < 4:
        return 0.95 if "good" in markers else 0.1
    return 0.05 if "bad" in markers else 0.9


def scripted(by_parent: dict[frozenset, list[str]]):
    """Each parent proposes its script's next change (nothing once the script is spent); every change names t1."""
    def propose(markers, nth, step):
        script = by_parent.get(frozenset(markers), [])
        return [(script[nth], ["t1"])] if nth < len(script) else []
    return propose


def test_a_harmful_line_change_is_rolled_back_and_its_node_exhausted() -> None:
    tree = ProductTree(p, T, K, "k", ProductSettings(width=1))
    r = tree.run(scripted({frozenset(): ["bad"]}), None, iterations=1)
    seed, child, back = tree.nodes[:3]
    assert child.markers == {"bad"} and child.arch.exhausted  # the line's change failed the loop's attribution
    assert back.arch.kind == "rollback" and back.markers == frozenset() and back.rolled_back == {"bad"}
    assert r.rollbacks == 1 and "bad" not in r.markers


def test_the_line_round_pools_into_the_line_node_and_a_good_change_is_kept() -> None:
    tree = ProductTree(p, T, K, "k", ProductSettings(width=2))
    r = tree.run(scripted({frozenset(): ["meh", "good"]}), None, iterations=1)
    by = {n.markers: n for n in tree.nodes}
    meh, good, merged = by[frozenset({"meh"})], by[frozenset({"good"})], by[frozenset({"good", "meh"})]
    assert merged.arch.kind == "merge" and merged.arch.parent == good.arch.id  # the round's one merge, on the better part
    # the line went on from the best new node (the merge): its round, the loop's next round pooled into it (`sync`),
    # a finalist's round; the loop's attribution reads only the loop's round
    assert (merged.arch.n_trials, int(merged.ln.sum())) == (3 * ROUND, ROUND)
    assert (good.arch.n_trials, int(good.ln.sum())) == (2 * ROUND, 0)  # its round and a finalist's
    assert (meh.arch.n_trials, int(meh.ln.sum())) == (ROUND, 0)
    assert r.rollbacks == 0 and "good" in r.markers and r.reason == "iterations"


def test_the_budget_is_respected_and_decides_the_children() -> None:
    w = make_tree_world(TreeScenario(tasks={"count": 20}, iterations=6, tree={"pool": 20}), 3)

    def propose(markers, nth, step):
        return [(c.uid, c.predicted_fixes + c.predicted_regressions) for c in w.propose(markers, nth)]
    rnd = 3 * len(w.base)
    budget = 8 * rnd + 10
    runs = [ProductTree(w.p, list(w.base), 3, "7:x", ProductSettings(call_price=3.7)).run(propose, budget, iterations=6)
            for _ in range(2)]
    a, b = runs
    assert a.cost <= budget and a.reason == "budget"
    assert a.expansions < 2 * 6  # the budget, not the width, decided how many children were made
    assert (a.markers, a.trials, a.expansions, a.cost) == (b.markers, b.trials, b.expansions, b.cost)  # same seed, same run
    free = ProductTree(w.p, list(w.base), 3, "7:x", ProductSettings(call_price=3.7)).run(propose, None, iterations=6)
    assert free.cost > budget and free.expansions > a.expansions
