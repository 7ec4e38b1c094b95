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


# -------------------------------------------------------------- the diagnostic knobs towards tree-ei (docs/search.md)
def _rooted(**knobs) -> tuple[ProductTree, object]:
    from ahe.evolution.evidence import Counts, fit_prior

    tree = ProductTree(p, T, K, "k", ProductSettings(**knobs))
    seed = tree.add(None, frozenset(), "seed")
    tree.evaluate(seed)
    tree.prior = fit_prior([Counts(int(s), int(n)) for s, n in zip(seed.s, seed.n)])
    return tree, seed


def _mask(*tasks: str):
    import numpy as np

    return np.array([t in tasks for t in T])


def test_rollback_prior_parent_reads_an_unrun_rollback_as_its_parent() -> None:
    for prior in ("beta11", "parent"):
        tree, seed = _rooted(rollback_prior=prior)
        bad = tree.add(seed, frozenset({"bad"}), "child", {"t1"})
        tree.evaluate(bad)
        tree.add(bad, frozenset(), "rollback")
        est = tree.estimates()
        assert est[2] == (est[1] if prior == "parent" else (0.5, est[2][1]))
        assert prior == "parent" or est[2][1] > 0.28  # Beta(1, 1): sd 0.29, above every evaluated node's


def test_ancestor_verdict_reads_the_tasks_the_parent_did_not_run_against_the_seed() -> None:
    got = {}
    for on in (False, True):
        tree, seed = _rooted(ancestor_verdict=on)
        a = tree.add(seed, frozenset({"meh"}), "child", {"t1"})
        tree.evaluate(a, which=_mask("t1"))
        b = tree.add(a, frozenset({"meh", "good"}), "child", {"t1", "t2", "t3", "t4"})
        tree.evaluate(b, which=_mask("t1", "t2", "t3", "t4"))
        tree.named_of = {"good": ["t1", "t2", "t3", "t4"]}
        got[on] = tree.p_above(b, a, {"good"}, loop=False)
    assert got[True] > got[False]  # off: only t1 (the one task both ran) is a look; on: t2-t4 against the seed too
    assert got[True] > 0.99


def test_dedupe_does_not_evaluate_a_harness_the_archive_holds() -> None:
    runs = {}
    for on in (False, True):
        tree = ProductTree(p, T, K, "k", ProductSettings(width=2, dedupe=on, line_round=False, merge=False))
        r = tree.run(scripted({frozenset(): ["good", "good", "good", "good", "good", "good"]}), None, iterations=2)
        runs[on] = (sum(1 for n in tree.nodes if n.markers == {"good"}), r.trials, tree.nodes[0].arch.exhausted)
    assert runs[False][0] > 1 and runs[True][0] == 1
    assert runs[True][1] < runs[False][1]
    assert runs[False][2] is False and runs[True][2] is False  # the seed's repeat is not yet three calls in a row: still open


def test_merge_rule_tree_skips_a_union_the_archive_already_holds() -> None:
    made = {}
    for rule in ("product", "tree"):
        tree, seed = _rooted(merge_rule=rule)
        for ms in ({"good"}, {"meh"}, {"good", "meh"}):
            tree.evaluate(tree.add(seed, frozenset(ms), "child", {"t1"}))
        kid = tree._merge_tree() if rule == "tree" else tree._merge()
        made[rule] = None if kid is None else kid.markers
    assert made == {"product": {"good", "meh"}, "tree": None}


def _budget_world():
    w = make_tree_world(TreeScenario(tasks={"count": 20}, iterations=6, tree={"pool": 20}), 3)

    def propose(markers, nth, step):
        return [(c.uid, c.predicted_fixes + c.predicted_regressions) for c in w.propose(markers, nth)]
    return w, propose, 3 * len(w.base)


def test_final_share_reserves_full_rounds_for_the_finalists_when_the_budget_ends_the_run() -> None:
    w, propose, rnd = _budget_world()
    full = {}
    for share in (0.0, 0.5):
        tree = ProductTree(w.p, list(w.base), 3, "7:x", ProductSettings(call_price=3.7, eval_share=0.2, line_round=False, final_share=share))
        r = tree.run(propose, 8 * rnd + 10, iterations=6)
        assert r.cost <= 8 * rnd + 10 and r.reason == "budget"
        full[share] = sum(1 for n in tree.nodes[1:] if n.n.min() > 0)  # nodes besides the seed that ran every task
    assert full == {0.0: 0, 0.5: 2}


def test_reserve_line_off_spends_the_kept_round_on_children() -> None:
    w, propose, rnd = _budget_world()
    calls = {}
    for keep in (True, False):
        tree = ProductTree(w.p, list(w.base), 3, "7:x", ProductSettings(call_price=3.7, line_round=False, spread=False, reserve_line=keep))
        r = tree.run(propose, 8 * rnd + 30, iterations=400)
        assert r.cost <= 8 * rnd + 30
        calls[keep] = r.expansions
    assert calls[False] > calls[True]
