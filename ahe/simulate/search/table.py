"""The table of `ahe simulate-search`: per world, strategy and budget, against line (docs/search.md)."""

from __future__ import annotations

from ahe.simulate.metrics import interval

STRATS = ("line", "tree-ei", "tree-ts", "tree-mix")


def summarize(rows: list[dict]) -> dict:
    """Per world × strategy × budget: gain (mean, lo, hi), the paired difference to line, share of the
    best reachable (pooled over seeds), trials and evolve calls; and the verdicts of issue 36's bar."""
    worlds = list(dict.fromkeys(r["world"] for r in rows))
    cells, verdict = [], {}
    for mult in (1, 2):
        for w in worlds:
            rs = [r for r in rows if r["world"] == w]
            reach = sum(r["reachable_gain"] for r in rs)
            for s in STRATS:
                key, line = f"{s}@{mult}x", f"line@{mult}x"
                gains = [r[key]["gain"] for r in rs]
                cells.append({
                    "world": w, "kind": rs[0]["kind"], "budget": f"{mult}x", "strategy": s, "seeds": len(rs),
                    "gain": interval(gains), "vs_line": interval([r[key]["gain"] - r[line]["gain"] for r in rs]),
                    "share": sum(gains) / reach if reach > 1e-12 else None,
                    "trials": sum(r[key]["trials"] for r in rs) / len(rs),
                    "evolve_calls": sum(r[key]["evolve_calls"] for r in rs) / len(rs),
                })
        for s in STRATS[1:]:
            tree_w = [c for c in cells if c["budget"] == f"{mult}x" and c["kind"] == "tree"]
            mine = sum(c["gain"][0] for c in tree_w if c["strategy"] == s)
            line = sum(c["gain"][0] for c in tree_w if c["strategy"] == "line")
            worse = [c["world"] for c in cells if c["budget"] == f"{mult}x" and c["kind"] == "stream"
                     and c["strategy"] == s and c["vs_line"][2] < 0]
            verdict[f"{s}@{mult}x"] = {"ratio_on_tree_worlds": mine / line if line > 1e-12 else None,
                                       "present_worlds_below_line_beyond_interval": worse}
    return {"cells": cells, "verdict": verdict}


def markdown(summary: dict) -> str:
    lines = ["| world | budget | strategy | true gain (95 % CI) | − line (paired CI) | share of best | trials | evolve calls |",
             "|---|---|---|---|---|---|---|---|"]
    for c in summary["cells"]:
        g, d = c["gain"], c["vs_line"]
        share = "—" if c["share"] is None else f"{100 * c['share']:.0f} %"
        diff = "" if c["strategy"] == "line" else f"{100 * d[0]:+.1f} [{100 * d[1]:+.1f}, {100 * d[2]:+.1f}]"
        lines.append(f"| {c['world']} ({c['kind']}) | {c['budget']} | {c['strategy']} | {100 * g[0]:+.1f} [{100 * g[1]:+.1f}, "
                     f"{100 * g[2]:+.1f}] | {diff} | {share} | {c['trials']:.0f} | {c['evolve_calls']:.1f} |")
    lines += ["", "| strategy@budget | tree / line gain over the tree worlds | present worlds below line beyond the interval |",
              "|---|---|---|"]
    for k, v in summary["verdict"].items():
        r = v["ratio_on_tree_worlds"]
        lines.append(f"| {k} | {'—' if r is None else f'{r:.2f}×'} | {', '.join(v['present_worlds_below_line_beyond_interval']) or 'none'} |")
    return "\n".join(lines) + "\n"
