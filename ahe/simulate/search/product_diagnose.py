"""The diagnostic of docs/search.md ("Which difference matters"): the product's tree mirror
(`product_tree.ProductTree`) with one knob at a time towards the simulator's tree-ei, against line,
on development seeds. Its own module: it reads `compare` (line's settings, the price), which imports
the mirror."""

from __future__ import annotations

from ahe.simulate.search.product_tree import ProductSettings, ProductTree

# -------------------------------------------------------------- the diagnostic (docs/search.md; development seeds)
VARIANTS = {  # one knob at a time towards the simulator's tree-ei, then all four; `planned`: iterations the budget affords at width 2
    "product": {}, "named+5%": {"eval_share": 0.05}, "child-verdict": {"child_verdict": True}, "per-task": {"per_task": True},
    "no-line-round": {"line_round": False}, "all-four": {"eval_share": 0.05, "child_verdict": True, "per_task": True, "line_round": False},
    "planned": {}, "all-four+planned": {"eval_share": 0.05, "child_verdict": True, "per_task": True, "line_round": False},
    # `unspread`: no iteration cap (400) and allocate not spreading the children over the rounds left: the budget ends the run
    "unspread": {"spread": False}, "all-four+unspread": {"eval_share": 0.05, "child_verdict": True, "per_task": True, "line_round": False, "spread": False},
}
# 7 Dec night: from a4+unspread (all-four+unspread) one remaining difference to tree-ei at a time, then together
A4U = VARIANTS["all-four+unspread"]
VARIANTS.update({
    "a4u+final": {**A4U, "final_share": 0.1}, "a4u+ancestor": {**A4U, "ancestor_verdict": True}, "a4u+dedupe": {**A4U, "dedupe": True},
    "a4u+w1": {**A4U, "width": 1}, "a4u+nostop": {**A4U, "stop_share": 0.0}, "a4u+treemerge": {**A4U, "merge_rule": "tree"},
    "a4u+noreserve": {**A4U, "reserve_line": False},
    "a4u+anc+final": {**A4U, "ancestor_verdict": True, "final_share": 0.1},
    "a4u+anc+dedupe+treemerge": {**A4U, "ancestor_verdict": True, "dedupe": True, "merge_rule": "tree"},
    "a4u+anc+all": {**A4U, "ancestor_verdict": True, "final_share": 0.1, "dedupe": True, "stop_share": 0.0, "merge_rule": "tree",
                    "reserve_line": False},
    # towards tree-line: the loop's line round kept, the child verdict against the ancestors, a rollback read as its parent
    "a3+line+anc+rbparent": {**A4U, "line_round": True, "ancestor_verdict": True, "rollback_prior": "parent"},
    "a4u+anc+all+w1": {**A4U, "ancestor_verdict": True, "final_share": 0.1, "dedupe": True, "stop_share": 0.0, "merge_rule": "tree",
                       "reserve_line": False, "width": 1},
})
# the simulator's own searches on the same worlds, seeds and budgets (compare.STRATEGIES, keyed as `ahe simulate --search`)
SIM = ("tree-ei", "tree-line")


def diagnose(which: str = "tree", seeds: range = range(10), mults: tuple[int, ...] = (1, 2), variants: tuple[str, ...] = tuple(VARIANTS),
             against: str = "line") -> str:
    """`python -c "from ahe.simulate.search.product_diagnose import diagnose; print(diagnose())"`: per tree world and
    budget, each variant's gain minus line's (`against`: or minus tree-ei's / tree-line's; paired over `seeds`, mean and 95 %
    interval), as a markdown table."""
    from ahe.simulate.metrics import interval
    from ahe.simulate.search.compare import PRICE, STRATEGIES, load_worlds, sim_line, tree_proposer
    from ahe.simulate.search.tree import TreeSearch
    from ahe.simulate.search.tree_world import make_tree_world

    lines = ["| world | budget | " + " | ".join(variants) + " |", "|---|---|" + "---|" * len(variants)]
    for _, sc in load_worlds(which):
        for mult in mults:
            diffs: dict[str, list[float]] = {v: [] for v in variants}
            for seed in seeds:
                w = make_tree_world(sc, seed)
                propose = tree_proposer(w)
                calls, rnd, s0 = sc.iterations * mult, sc.k * len(w.base), w.pass_at_1(set())
                r = sim_line(w, sc.k, seed, propose, calls)
                budget, line = r.trials + PRICE * r.expansions, w.pass_at_1(set(r.markers)) - s0
                if against in SIM:
                    line = w.pass_at_1(set(TreeSearch(w.p, list(w.base), sc.k, f"{seed}:tree-ei", STRATEGIES[against]).run(propose, budget).markers)) - s0
                for v in variants:
                    if v in SIM:
                        r = TreeSearch(w.p, list(w.base), sc.k, f"{seed}:tree-ei", STRATEGIES[v]).run(propose, budget)
                        diffs[v].append(w.pass_at_1(set(r.markers)) - s0 - line)
                        continue
                    knobs = VARIANTS[v]
                    its = max(1, int((budget - rnd) // (4 * rnd + 2 * PRICE))) if v.endswith("planned") else 400 if v.endswith("unspread") else calls
                    res = ProductTree(w.p, list(w.base), sc.k, f"{seed}:tree-ei", ProductSettings(call_price=PRICE, **knobs)).run(propose, budget, its)
                    diffs[v].append(w.pass_at_1(set(res.markers)) - s0 - line)
            cells = ["{:+.3f} [{:+.3f}, {:+.3f}]".format(*interval(d)) for d in diffs.values()]
            lines.append(f"| {sc.name} | {mult}x | " + " | ".join(cells) + " |")
    return "\n".join(lines)
