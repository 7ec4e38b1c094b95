"""The table of `ahe simulate-search`: per world, strategy and budget, against line (docs/search-simulator.md)."""

from __future__ import annotations

from ahe.simulate.metrics import interval

STRATS = ("line", "tree-ei", "tree-ts", "tree-mix", "tree-drop", "tree-line", "tree-product")


def _budgets(rows: list[dict]) -> list[int]:
    """The budget multiples every row holds (1x, 2x, and 4x where it was run)."""
    have = [{int(k.split("@")[1][:-1]) for k in r if k.startswith("line@")} for r in rows]
    return sorted(set.intersection(*have)) if have else []


def _strats(rows: list[dict]) -> list[str]:
    return [s for s in STRATS if rows and all(f"{s}@1x" in r for r in rows)]


def summarize(rows: list[dict]) -> dict:
    """Per world × strategy × budget: gain (mean, lo, hi), the paired difference to line, share of the
    best reachable (pooled over seeds), trials and evolve calls; the verdicts of issue 36's bar; and per
    world the increments from one budget to the next (`increments`)."""
    worlds = list(dict.fromkeys(r["world"] for r in rows))
    strats = _strats(rows)
    cells, verdict = [], {}
    for mult in _budgets(rows):
        for w in worlds:
            rs = [r for r in rows if r["world"] == w]
            reach = sum(r["reachable_gain"] for r in rs)
            for s in strats:
                key, line = f"{s}@{mult}x", f"line@{mult}x"
                gains = [r[key]["gain"] for r in rs]
                cells.append({
                    "world": w, "kind": rs[0]["kind"], "budget": f"{mult}x", "strategy": s, "seeds": len(rs),
                    "gain": interval(gains), "vs_line": interval([r[key]["gain"] - r[line]["gain"] for r in rs]),
                    "share": sum(gains) / reach if reach > 1e-12 else None,
                    "trials": sum(r[key]["trials"] for r in rs) / len(rs),
                    "evolve_calls": sum(r[key]["evolve_calls"] for r in rs) / len(rs),
                })
        for s in strats[1:]:
            tree_w = [c for c in cells if c["budget"] == f"{mult}x" and c["kind"] == "tree"]
            mine = sum(c["gain"][0] for c in tree_w if c["strategy"] == s)
            line = sum(c["gain"][0] for c in tree_w if c["strategy"] == "line")
            worse = [c["world"] for c in cells if c["budget"] == f"{mult}x" and c["kind"] == "stream"
                     and c["strategy"] == s and c["vs_line"][2] < 0]
            verdict[f"{s}@{mult}x"] = {"ratio_on_tree_worlds": mine / line if line > 1e-12 else None,
                                       "present_worlds_below_line_beyond_interval": worse}
    return {"cells": cells, "verdict": verdict, "increments": increments(rows)}


def increments(rows: list[dict]) -> list[dict]:
    """Per tree world and each step between budgets (1x→2x, 2x→4x): each strategy's gain from the larger
    budget, seeds paired (mean and 95 % interval), and the tree's increment minus line's. Line has
    flattened where its increment's interval includes 0 (or lies below it)."""
    out = []
    budgets, strats = _budgets(rows), _strats(rows)
    for w in dict.fromkeys(r["world"] for r in rows if r["kind"] == "tree"):
        rs = [r for r in rows if r["world"] == w]
        for lo, hi in zip(budgets, budgets[1:]):
            def inc(s: str) -> list[float]:
                return [r[f"{s}@{hi}x"]["gain"] - r[f"{s}@{lo}x"]["gain"] for r in rs]
            line = inc("line")
            row = {"world": w, "step": f"{lo}x→{hi}x", "line": interval(line), "line_flat": bool(interval(line)[1] <= 0)}
            for s in strats[1:]:
                mine = inc(s)
                row[s] = interval(mine)
                row[f"{s}-line"] = interval([a - b for a, b in zip(mine, line)])
            out.append(row)
    return out


def _ci(x: tuple[float, float, float]) -> str:
    return f"{100 * x[0]:+.1f} [{100 * x[1]:+.1f}, {100 * x[2]:+.1f}]"


def markdown(summary: dict) -> str:
    lines = ["| world | budget | strategy | true gain (95 % CI) | − line (paired CI) | share of best | trials | evolve calls |",
             "|---|---|---|---|---|---|---|---|"]
    for c in summary["cells"]:
        share = "—" if c["share"] is None else f"{100 * c['share']:.0f} %"
        diff = "" if c["strategy"] == "line" else _ci(c["vs_line"])
        lines.append(f"| {c['world']} ({c['kind']}) | {c['budget']} | {c['strategy']} | {_ci(c['gain'])} | {diff} | {share} | "
                     f"{c['trials']:.0f} | {c['evolve_calls']:.1f} |")
    lines += ["", "| strategy@budget | tree / line gain over the tree worlds | present worlds below line beyond the interval |",
              "|---|---|---|"]
    for k, v in summary["verdict"].items():
        r = v["ratio_on_tree_worlds"]
        lines.append(f"| {k} | {'—' if r is None else f'{r:.2f}×'} | {', '.join(v['present_worlds_below_line_beyond_interval']) or 'none'} |")
    incs = summary.get("increments") or []
    if incs:
        strats = [k for k in incs[0] if k in STRATS[1:]]
        lines += ["", "Keeps gaining where line has flattened? Per tree world, the gain from the larger budget (points, seeds "
                  "paired, 95 % CI); line has flattened where its increment's interval includes 0.", "",
                  "| world | step | line | line flat? | " + " | ".join(f"{s} | {s} − line" for s in strats) + " |",
                  "|---|---|---|---|" + "---|---|" * len(strats)]
        for r in incs:
            lines.append(f"| {r['world']} | {r['step']} | {_ci(r['line'])} | {'yes' if r['line_flat'] else 'no'} | "
                         + " | ".join(f"{_ci(r[s])} | {_ci(r[f'{s}-line'])}" for s in strats) + " |")
    return "\n".join(lines) + "\n"
