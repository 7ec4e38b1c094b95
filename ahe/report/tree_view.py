"""The tree of a `search: tree` run (tree.json) as the audit shows it: every node with its estimate
and interval, the change ids its edge adds, merges made and refused, pruned nodes, the finalists
and the path from the seed to `best` — so a morning's reader sees what was tried where."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from ahe.evolution.tree.archive import Tree, load_tree, tree_path
from ahe.run_folder import RunFolder


def _status(tree: Tree, node_id: str, on_path: set[str]) -> str:
    node = tree.node(node_id)
    marks = ["best" if node_id == tree.best else "", "on the path to best" if node_id in on_path and node_id != tree.best else "",
             "finalist" if node_id in tree.finalists else "", "pruned" if node.pruned else "",
             f"exhausted ({node.note or 'its evolve call made no child'})" if node.exhausted else "",
             f"stopped ({node.stopped})" if node.stopped else ""]
    return ", ".join(m for m in marks if m) or "-"


def tree_summary(run: RunFolder) -> dict[str, Any] | None:
    """The tree as plain data for the audit's JSON, or None when the run has no tree."""
    if not tree_path(run).is_file():
        return None
    tree = load_tree(run)
    path_to_best = tree.path(tree.best) if tree.best else []
    on_path = set(path_to_best)
    nodes = []
    for n in tree.nodes:
        mean, sd = n.estimate()
        low, high = n.interval()
        nodes.append({"id": n.id, "commit": n.commit, "parent": n.parent, "kind": n.kind, "iteration": n.iteration,
                      "changes": list(n.changes), "merged_from": list(n.merged_from), "rolled_back": list(n.rolled_back),
                      "trials": n.n_trials, "passed": n.n_passed, "estimate": round(mean, 4), "sd": round(sd, 4),
                      "interval": [round(low, 4), round(high, 4)], "pruned": n.pruned, "exhausted": n.exhausted,
                      "status": _status(tree, n.id, on_path)})
    return {"nodes": nodes, "merges": [m.model_dump() for m in tree.merges],
            "rounds": [r.model_dump() for r in tree.rounds], "finalists": list(tree.finalists), "best": tree.best,
            "best_reason": tree.best_reason, "path_to_best": path_to_best}


def _edge(node: dict) -> str:
    if node["kind"] == "merge":
        return "merge of " + " + ".join([node["parent"], *node["merged_from"]])  # a merge's first part is its parent
    parts = [", ".join(node["changes"])] if node["changes"] else []
    if node["rolled_back"]:
        parts.append("rolled back " + ", ".join(node["rolled_back"]))
    return "; ".join(parts) or ("seed" if node["kind"] == "seed" else "-")


def render_tree(summary: dict[str, Any], console: Any) -> None:
    """The tree's table, its merges and the path to best (est. = the Beta posterior's mean of pass@1)."""
    from rich.table import Table

    console.print()
    console.print("[bold]Search tree[/] (tree.json): " + (escape(f"best {summary['best']} — {summary['best_reason']}")
                                                         if summary["best"] else "no best chosen yet"))
    t = Table(title="nodes (est. = estimated pass@1 with its 95 % interval, over the node's own trials)")
    for col in ("node", "parent", "round", "edge (changes)", "trials", "est. [95 % interval]", "status"):
        t.add_column(col, overflow="fold")
    for n in summary["nodes"]:
        t.add_row(n["id"], n["parent"] or "-", str(n["iteration"]), escape(_edge(n)), f"{n['passed']}/{n['trials']}",
                  f"{n['estimate']:.3f} [{n['interval'][0]:.3f}, {n['interval'][1]:.3f}]", n["status"])
    console.print(t)
    for m in summary["merges"]:
        made = f"made {m['node']}" if m["node"] else "not made"
        console.print(escape(f"  merge, round {m['iteration']}: {' + '.join(m['parts'])} — {made}: {m['reason']}"))
    for r in summary["rounds"]:
        if r.get("crossed"):  # a budget crossed inside the round (ahe.evolution.tree.crossing)
            console.print(escape(f"  budget, round {r['iteration']}: {r['crossed']}; not started: {', '.join(r['not_started'])}"))
    if summary["path_to_best"]:
        console.print(escape("  path to best: " + " → ".join(summary["path_to_best"])))
