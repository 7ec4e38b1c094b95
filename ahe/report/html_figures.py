"""Inline SVG for the paper's figures in `ahe report` (data from `ahe.report.figures`).

Same rules as `html_svg`: no script, no library, every run-provided string escaped, `Markup` out.
"""

from __future__ import annotations

from markupsafe import Markup, escape

from ahe.report.html_svg import _W_PAD_L, _W_PAD_R, _PAD_B, _PAD_T, _fmt

DIFFICULTY_COLORS = {"easy": "#1a9850", "medium": "#e08214", "hard": "#b2182b", "unknown": "#777777"}
_EXTRA = ("#4575b4", "#8073ac", "#35978f", "#bf812d")
TP, FP, MISS = "#1a9850", "#d73027", "#fdae61"


def _color(d: str, ds: list[str]) -> str:
    if d in DIFFICULTY_COLORS:
        return DIFFICULTY_COLORS[d]
    others = [x for x in ds if x not in DIFFICULTY_COLORS]
    return _EXTRA[others.index(d) % len(_EXTRA)]


def _frame(svg_id: str, label: str, width: int, height: int) -> list[str]:
    return [f'<svg id="{svg_id}" class="chart" role="img" aria-label="{escape(label)}" '
            f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']


def difficulty_curves(rows: list[dict], difficulties: list[str], width: int = 720, height: int = 260) -> Markup:
    """pass@1 per iteration, one line per difficulty (and overall, dashed)."""
    if not rows:
        return Markup('<p class="pending">pending: no iteration has been evaluated yet</p>')
    iters = [r["iteration"] for r in rows]
    lo, hi = min(iters), max(iters)
    pw, ph = width - _W_PAD_L - _W_PAD_R - 90, height - _PAD_T - _PAD_B

    def x(i: int) -> float:
        return _W_PAD_L + (pw * (i - lo) / (hi - lo) if hi > lo else pw / 2)

    def y(v: float) -> float:
        return _PAD_T + ph * (1 - v)

    out = _frame("difficulty-curves", "pass@1 by difficulty per iteration", width, height)
    for v in (0, 0.5, 1):
        out.append(f'<line class="grid" x1="{_W_PAD_L}" x2="{_W_PAD_L + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
                   f'<text class="axis" x="{_W_PAD_L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    for i in iters:
        out.append(f'<text class="axis" x="{x(i):.1f}" y="{height - _PAD_B + 16}" text-anchor="middle">{i}</text>')
    series = [("overall", [(r["iteration"], r["pass_at_1"]) for r in rows], "#333333", "6 4")]
    series += [(d, [(r["iteration"], (r["by_difficulty"].get(d) or {}).get("pass_at_1")) for r in rows],
                _color(d, difficulties), "") for d in difficulties]
    for n, (name, pts, color, dash) in enumerate(series):
        pts = [(i, v) for i, v in pts if v is not None]
        if len(pts) > 1:
            d = " ".join(f"{'M' if k == 0 else 'L'}{x(i):.1f},{y(v):.1f}" for k, (i, v) in enumerate(pts))
            extra = f' stroke-dasharray="{dash}"' if dash else ""
            out.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="2"{extra}/>')
        for i, v in pts:
            out.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3.5" fill="{color}">'
                       f'<title>iteration {i} · {escape(name)}: pass@1 {v:.3f}</title></circle>')
        ly = _PAD_T + 14 + 18 * n
        out.append(f'<rect x="{_W_PAD_L + pw + 14}" y="{ly - 9}" width="10" height="10" fill="{color}"/>'
                   f'<text class="axis" x="{_W_PAD_L + pw + 28}" y="{ly}">{escape(name)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def attribution_chart(rounds: list[dict], width: int = 720, height: int = 280) -> Markup:
    """Per round: stacked bars of true positives, false positives and misses — fixes left,
    regressions right — with that round's pass@1 as a line (right axis), as in the paper."""
    if not rounds:
        return Markup('<p class="pending">pending: no round has judged any change yet</p>')
    pw, ph = width - _W_PAD_L - _W_PAD_R - 40, height - _PAD_T - _PAD_B - 14
    top = max(1, max(b["true_positives"] + b["false_positives"] + b["misses"]
                     for r in rounds for b in (r["fix_predictions"], r["regression_predictions"])))
    slot = pw / len(rounds)
    bw = min(28, slot * 0.3)
    out = _frame("attribution-chart", "self-attribution per round: true positives, false positives and misses", width, height)
    for f in (0, 0.5, 1):
        yv = _PAD_T + ph * (1 - f)
        out.append(f'<line class="grid" x1="{_W_PAD_L}" x2="{_W_PAD_L + pw}" y1="{yv:.1f}" y2="{yv:.1f}"/>'
                   f'<text class="axis" x="{_W_PAD_L - 6}" y="{yv + 4:.1f}" text-anchor="end">{top * f:.0f}</text>'
                   f'<text class="axis" x="{_W_PAD_L + pw + 6}" y="{yv + 4:.1f}">{_fmt(f)}</text>')
    line = []
    for n, r in enumerate(rounds):
        cx = _W_PAD_L + slot * (n + 0.5)
        for k, (kind, label) in enumerate((("fix_predictions", "fixes"), ("regression_predictions", "regressions"))):
            b = r[kind]
            bx = cx + (k - 1) * (bw + 3) + 1.5
            yv = _PAD_T + ph
            for part, color in (("true_positives", TP), ("false_positives", FP), ("misses", MISS)):
                v = b[part]
                if not v:
                    continue
                h = ph * v / top
                yv -= h
                out.append(f'<rect x="{bx:.1f}" y="{yv:.1f}" width="{bw:.1f}" height="{h:.1f}" fill="{color}">'
                           f'<title>round {r["iteration"]} · {label}: {v} {part.replace("_", " ")}</title></rect>')
            out.append(f'<text class="axis" x="{bx + bw / 2:.1f}" y="{_PAD_T + ph + 12}" text-anchor="middle">{label[0]}</text>')
        out.append(f'<text class="axis" x="{cx:.1f}" y="{_PAD_T + ph + 26}" text-anchor="middle">{r["iteration"]}</text>')
        if r.get("pass_at_1") is not None:
            line.append((cx, _PAD_T + ph * (1 - r["pass_at_1"]), r))
    if len(line) > 1:
        d = " ".join(f"{'M' if k == 0 else 'L'}{px:.1f},{py:.1f}" for k, (px, py, _) in enumerate(line))
        out.append(f'<path class="pass-line" d="{d}"/>')
    for px, py, r in line:
        out.append(f'<circle class="pt" cx="{px:.1f}" cy="{py:.1f}" r="4"><title>round {r["iteration"]}: pass@1 '
                   f'{r["pass_at_1"]:.3f}</title></circle>')
    lx = _W_PAD_L
    for name, color in (("true positive", TP), ("false positive", FP), ("miss", MISS)):
        out.append(f'<rect x="{lx}" y="{height - 12}" width="10" height="10" fill="{color}"/>'
                   f'<text class="axis" x="{lx + 14}" y="{height - 3}">{name}</text>')
        lx += 30 + 7 * len(name)
    out.append(f'<text class="axis" x="{lx}" y="{height - 3}">f = fix predictions, r = regression predictions; line = pass@1</text>')
    out.append("</svg>")
    return Markup("".join(out))
