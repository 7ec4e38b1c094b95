"""The search tree of a `search: tree` run as inline SVG for `ahe report` (data: `tree_view.tree_summary`).

Columns are depths (the seed at 0; a node one column right of the deepest of its parents, so a
merge sits right of both its parts); rows come from the first-parent tree, leaves one slot each
and a parent centred on its children, so no two boxes of a column overlap. Each node shows its id,
round, kind, estimated pass@1 with its 95 % interval (as numbers and as a bar on [0, 1]), trials
and status; each edge is labelled with the change ids the child adds. Same rules as `html_svg`:
no script, every run-provided string escaped, `Markup` out.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

BOX_W, BOX_H = 260, 78
COL_W, ROW_H = 410, 96
PAD_L, PAD_T = 12, 30
RUN_IN = 80  # an edge ends in a straight run this long into its child; the label sits on it
LABEL_CHARS, LABEL_LINES = 20, 3  # per line, then "+k more" (the whole text is in the label's tooltip)


def _depths(nodes: dict[str, dict]) -> dict[str, int]:
    """Depth of every node: 0 without a (known) parent, else 1 + the deepest of its parents."""
    out: dict[str, int] = {}

    def depth(nid: str, seen: frozenset[str]) -> int:
        if nid in out:
            return out[nid]
        n = nodes[nid]
        parents = [p for p in [n["parent"], *n["merged_from"]] if p in nodes and p not in seen]
        out[nid] = 1 + max(depth(p, seen | {nid}) for p in parents) if parents else 0
        return out[nid]

    for nid in nodes:
        depth(nid, frozenset())
    return out


def _rows(nodes: dict[str, dict]) -> dict[str, float]:
    """Row of every node: leaves of the first-parent tree take one slot each, in node order."""
    kids: dict[str, list[str]] = {nid: [] for nid in nodes}
    roots = []
    for nid, n in nodes.items():
        (kids[n["parent"]] if n["parent"] in nodes and n["parent"] != nid else roots).append(nid)
    rows: dict[str, float] = {}
    slot = [0]

    def place(nid: str) -> float:
        if nid in rows:  # a cycle in a hand-edited file: place it once
            return rows[nid]
        rows[nid] = float(slot[0])
        below = [place(k) for k in kids[nid] if k not in rows]
        if below:
            rows[nid] = (min(below) + max(below)) / 2
        else:
            slot[0] += 1
        return rows[nid]

    for r in roots:
        place(r)
    for nid in nodes:  # nodes no root reaches (a parent cycle)
        if nid not in rows:
            place(nid)
    return rows


def _classes(n: dict, summary: dict[str, Any], on_path: set[str]) -> str:
    cls = ["tree-node", f"kind-{n['kind']}"]
    cls += [c for c, yes in (("best", n["id"] == summary["best"]), ("on-path", n["id"] in on_path),
                             ("finalist", n["id"] in summary["finalists"]), ("pruned", n.get("pruned")),
                             ("exhausted", n.get("exhausted"))) if yes]
    return " ".join(cls)


def _marks(n: dict, summary: dict[str, Any]) -> str:
    marks = [m for m, yes in (("best", n["id"] == summary["best"]), ("finalist", n["id"] in summary["finalists"]),
                              ("pruned", n.get("pruned")), ("exhausted", n.get("exhausted"))) if yes]
    return " · ".join(marks)


def _node(n: dict, x: float, y: float, summary: dict[str, Any], on_path: set[str]) -> str:
    mean, (low, high) = float(n["estimate"]), (float(v) for v in n["interval"])
    nid = escape(n["id"])
    bar_x, bar_w, bar_y = x + 10, BOX_W - 20, y + 46

    def at(v: float) -> float:
        return bar_x + bar_w * max(0.0, min(1.0, v))

    marks = _marks(n, summary)
    tip = (f"{n['id']} ({n['kind']}, round {n['iteration']}): estimated pass@1 {mean:.3f}, 95 % interval "
           f"[{low:.3f}, {high:.3f}], {n['passed']}/{n['trials']} trials passed; adds {', '.join(n['changes']) or 'nothing'}"
           + (f"; status: {n['status']}" if n["status"] != "-" else ""))
    return (f'<g class="{_classes(n, summary, on_path)}" data-node="{nid}"><title>{escape(tip)}</title>'
            f'<rect class="box" x="{x:.1f}" y="{y:.1f}" width="{BOX_W}" height="{BOX_H}" rx="6"/>'
            f'<text class="node-id" x="{x + 10:.1f}" y="{y + 17:.1f}">{nid}</text>'
            f'<text class="node-marks" x="{x + BOX_W - 10:.1f}" y="{y + 17:.1f}" text-anchor="end">{escape(marks)}</text>'
            f'<text x="{x + 10:.1f}" y="{y + 35:.1f}">est. {mean:.3f} [{low:.3f}, {high:.3f}]</text>'
            f'<line class="bar-track" x1="{bar_x:.1f}" x2="{bar_x + bar_w:.1f}" y1="{bar_y:.1f}" y2="{bar_y:.1f}"/>'
            f'<line class="bar-ci" x1="{at(low):.1f}" x2="{at(high):.1f}" y1="{bar_y:.1f}" y2="{bar_y:.1f}"/>'
            f'<circle class="bar-mean" cx="{at(mean):.1f}" cy="{bar_y:.1f}" r="3.5"/>'
            f'<text x="{x + 10:.1f}" y="{y + 68:.1f}">trials {int(n["passed"])}/{int(n["trials"])}</text>'
            f'<text class="node-meta" x="{x + BOX_W - 10:.1f}" y="{y + 68:.1f}" text-anchor="end">round '
            f'{int(n["iteration"])} · {escape(n["kind"])}</text>'
            "</g>")


def _edge_label(n: dict) -> list[str]:
    """The lines of an edge's label: one per change id the child adds (and the ids rolled back)."""
    lines = list(n["changes"]) + [f"rolled back {c}" for c in n["rolled_back"]]
    lines = lines or ["merge" if n["kind"] == "merge" else "no change"]
    if len(lines) > LABEL_LINES:
        lines = lines[:LABEL_LINES - 1] + [f"+{len(lines) - LABEL_LINES + 1} more"]
    return [ln if len(ln) <= LABEL_CHARS else ln[:LABEL_CHARS - 1] + "…" for ln in lines]


def _edge(src: tuple[float, float], dst: tuple[float, float], cls: str, ends: tuple[str, str], n: dict | None) -> str:
    """A curve from the parent's right side into a straight run to the child's left side;
    `n` (the child) given: its label on the straight run."""
    (x1, y1), (x2, y2) = (src[0] + BOX_W, src[1] + BOX_H / 2), (dst[0], dst[1] + BOX_H / 2)
    run_x = max(x1 + 10, x2 - RUN_IN)
    mid = (x1 + run_x) / 2
    out = (f'<g class="{cls}" data-from="{escape(ends[0])}" data-to="{escape(ends[1])}">'
           f'<path d="M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {run_x:.1f},{y2:.1f} H{x2:.1f}"/>')
    if n is not None:
        lines = _edge_label(n)
        full = ", ".join(list(n["changes"]) + [f"rolled back {c}" for c in n["rolled_back"]]) or lines[0]
        for k, ln in enumerate(lines):
            out += (f'<text class="edge-label" x="{x2 - 8:.1f}" y="{y2 - 6 - 13 * (len(lines) - 1 - k):.1f}" '
                    f'text-anchor="end">{escape(ln)}<title>{escape(ends[1])} adds: {escape(full)}</title></text>')
    return out + "</g>"


def tree_svg(summary: dict[str, Any]) -> Markup:
    """The whole tree: one `g.tree-node` per node, one `g.tree-edge` per parent → child link
    (a merge has one from each part, `merge-edge`); the edges of the path to best are `on-path`."""
    nodes = {n["id"]: n for n in summary["nodes"]}
    if not nodes:
        return Markup('<p class="pending">pending: tree.json has no node yet</p>')
    depth, row = _depths(nodes), _rows(nodes)
    pos = {nid: (PAD_L + COL_W * depth[nid], PAD_T + ROW_H * row[nid]) for nid in nodes}
    path = summary["path_to_best"]
    on_path, path_edges = set(path), set(zip(path, path[1:]))
    width = PAD_L + COL_W * max(depth.values()) + BOX_W + PAD_L
    height = PAD_T + ROW_H * max(row.values()) + BOX_H + 10
    out = [f'<svg id="search-tree" class="chart tree" role="img" aria-label="the search tree: nodes by depth" '
           f'xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
           # fits the page down to 70 % of its size (text stays readable), then the box scrolls sideways
           f'style="width:100%;height:auto;max-width:{width:.0f}px;min-width:{0.7 * width:.0f}px">']
    for d in range(max(depth.values()) + 1):
        out.append(f'<text class="axis" x="{PAD_L + COL_W * d + BOX_W / 2:.1f}" y="14" text-anchor="middle">'
                   f'depth {d}{" (seed)" if d == 0 else ""}</text>')
    for nid, n in nodes.items():
        parents = [p for p in [n["parent"], *n["merged_from"]] if p in nodes and p != nid]
        for k, p in enumerate(dict.fromkeys(parents)):
            cls = "tree-edge" + (" merge-edge" if n["kind"] == "merge" else "") + (" on-path" if (p, nid) in path_edges else "")
            out.append(_edge(pos[p], pos[nid], cls, (p, nid), n if k == 0 else None))
    out += [_node(n, *pos[nid], summary, on_path) for nid, n in nodes.items()]
    out.append("</svg>")
    return Markup("".join(out))


def tree_legend() -> Markup:
    """What the boxes, outlines and lines of `tree_svg` mean."""
    items = [("box", "", "a node (an evaluated harness)"), ("box", "best", "best"), ("box", "finalist", "finalist"),
             ("box", "pruned", "pruned"), ("box", "exhausted", "exhausted (not expanded again: no child, or rolled back)"),
             ("line", "on-path", "path from the seed to best"), ("line", "merge-edge", "a merge's part"),
             ("bar", "", "estimated pass@1 and its 95 % interval on [0, 1]")]
    out, x, y, right = [], 4, 0, 0
    for shape, cls, label in items:
        step = 40 + 6.4 * len(label)
        if x + step > 760:  # wrap: the legend stays narrower than the page
            x, y = 4, y + 24
        if shape == "box":
            out.append(f'<g class="tree-node {cls}"><rect class="box" x="{x}" y="{y + 5}" width="22" height="14" rx="3"/></g>')
        elif shape == "line":
            out.append(f'<g class="tree-edge {cls}"><path d="M{x},{y + 12} H{x + 22}"/></g>')
        else:
            out.append(f'<g class="tree-node"><line class="bar-track" x1="{x}" x2="{x + 22}" y1="{y + 12}" y2="{y + 12}"/>'
                       f'<line class="bar-ci" x1="{x + 6}" x2="{x + 18}" y1="{y + 12}" y2="{y + 12}"/>'
                       f'<circle class="bar-mean" cx="{x + 12}" cy="{y + 12}" r="3"/></g>')
        out.append(f'<text x="{x + 28}" y="{y + 16}">{label}</text>')
        x += step
        right = max(right, x)
    return Markup(f'<svg id="tree-legend" class="legend" xmlns="http://www.w3.org/2000/svg" width="{right:.0f}" '
                  f'height="{y + 24}" viewBox="0 0 {right:.0f} {y + 24}">' + "".join(out) + "</svg>")
