"""Inline SVG charts for `ahe report` — drawn here, no chart library, no network.

Every piece of text that could come from a run (task names, roles) goes through
`markupsafe.escape`; the functions return `Markup` so the jinja2 template does not escape
the SVG markup itself a second time.
"""

from __future__ import annotations

from markupsafe import Markup, escape

# Heatmap cell states (also used for the legend and the CSS classes).
NOT_EVALUATED = "not-evaluated"
PENDING = "pending"
INFRA = "infra"

_W_PAD_L, _W_PAD_R, _PAD_T, _PAD_B = 48, 16, 16, 36


def _fmt(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".") if v not in (0, 1) else str(int(v))


def rate_color(rate: float) -> str:
    """0 → red, 0.5 → yellow, 1 → green (a linear ramp in RGB)."""
    rate = max(0.0, min(1.0, rate))
    red, yellow, green = (215, 48, 39), (254, 224, 139), (26, 152, 80)
    a, b, f = (red, yellow, rate * 2) if rate <= 0.5 else (yellow, green, (rate - 0.5) * 2)
    r, g, bl = (round(a[i] + (b[i] - a[i]) * f) for i in range(3))
    return f"#{r:02x}{g:02x}{bl:02x}"


def pass_curve(points: list[tuple[int, float | None]], best_iteration: int | None,
               width: int = 720, height: int = 280) -> Markup:
    """pass@1 per iteration (solid) and the best-so-far (dashed step line).

    `points`: (iteration, pass@1 or None while pending), in iteration order.
    """
    if not points:
        return Markup('<p class="pending">pending: no iteration has been evaluated yet</p>')
    iters = [i for i, _ in points]
    lo, hi = min(iters), max(iters)
    span = max(1, hi - lo)
    pw, ph = width - _W_PAD_L - _W_PAD_R, height - _PAD_T - _PAD_B

    def x(i: int) -> float:
        return _W_PAD_L + (pw * (i - lo) / span if hi > lo else pw / 2)

    def y(v: float) -> float:
        return _PAD_T + ph * (1 - v)

    out = [f'<svg id="pass-curve" class="chart" role="img" aria-label="pass@1 per iteration" '
           f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    for v in (0, 0.25, 0.5, 0.75, 1):
        out.append(f'<line class="grid" x1="{_W_PAD_L}" x2="{width - _W_PAD_R}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
                   f'<text class="axis" x="{_W_PAD_L - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{_fmt(v)}</text>')
    for i in iters:
        out.append(f'<text class="axis" x="{x(i):.1f}" y="{height - _PAD_B + 16}" text-anchor="middle">{i}</text>')
    out.append(f'<text class="axis" x="{_W_PAD_L + pw / 2:.1f}" y="{height - 4}" text-anchor="middle">iteration</text>')

    done = [(i, v) for i, v in points if v is not None]
    best: list[tuple[int, float]] = []
    run_max = -1.0
    for i, v in done:
        run_max = max(run_max, v)
        best.append((i, run_max))
    if len(done) > 1:
        d = " ".join(f"{'M' if n == 0 else 'L'}{x(i):.1f},{y(v):.1f}" for n, (i, v) in enumerate(done))
        out.append(f'<path class="pass-line" d="{d}"/>')
    if len(best) > 1:
        d = f"M{x(best[0][0]):.1f},{y(best[0][1]):.1f}"
        for _, (i1, v1) in zip(best, best[1:]):
            d += f" H{x(i1):.1f} V{y(v1):.1f}"
        out.append(f'<path class="best-line" d="{d}"/>')
    for i, v in done:
        cls = "pt best" if i == best_iteration else "pt"
        out.append(f'<circle class="{cls}" cx="{x(i):.1f}" cy="{y(v):.1f}" r="{6 if i == best_iteration else 4}">'
                   f'<title>iteration {i}: pass@1 {v:.3f}{" (best)" if i == best_iteration else ""}</title></circle>')
    for i, v in points:
        if v is None:
            out.append(f'<text class="pending-mark" x="{x(i):.1f}" y="{y(0) - 6:.1f}" text-anchor="middle">'
                       f'pending<title>iteration {i}: not evaluated yet</title></text>')
    out.append("</svg>")
    return Markup("".join(out))


def heatmap(tasks: list[str], iterations: list[int], cells: dict[tuple[str, int], dict]) -> Markup:
    """Task × iteration grid. A cell dict: {"state": "rate"|NOT_EVALUATED|PENDING|INFRA,
    "rate": float, "infra": int, "trials": int}."""
    if not tasks or not iterations:
        return Markup('<p class="pending">pending: no per-task results yet</p>')
    cw, ch = 56, 26
    label_w = min(320, 12 + 7 * max(len(t) for t in tasks))
    top = 22
    width, height = label_w + cw * len(iterations) + 8, top + ch * len(tasks) + 8
    out = [f'<svg id="heatmap" class="chart" role="img" aria-label="pass rate per task and iteration" '
           f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
           '<defs><pattern id="hm-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
           'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f3f3f3"/>'
           '<line x1="0" y1="0" x2="0" y2="6" stroke="#c8c8c8" stroke-width="2"/></pattern></defs>']
    for c, it in enumerate(iterations):
        out.append(f'<text class="axis" x="{label_w + c * cw + cw / 2}" y="{top - 8}" text-anchor="middle">{it}</text>')
    for r, task in enumerate(tasks):
        ty = top + r * ch
        out.append(f'<text class="task-label" x="{label_w - 8}" y="{ty + ch / 2 + 4}" text-anchor="end">{escape(task)}</text>')
        for c, it in enumerate(iterations):
            cell = cells.get((task, it), {"state": NOT_EVALUATED})
            cx = label_w + c * cw
            state = cell["state"]
            if state == "rate":
                rate = cell["rate"]
                fill, label = rate_color(rate), _fmt(rate)
                extra = f", {cell['infra']} infrastructure error(s) counted as 0" if cell.get("infra") else ""
                tip = f"{task} · iteration {it}: pass rate {rate:.2f} ({cell.get('passed', '?')}/{cell.get('trials', '?')}){extra}"
                cls = "cell rate" + (" failed" if rate == 0 else "") + (" has-infra" if cell.get("infra") else "")
            elif state == INFRA:
                fill, label, cls = "#3b2a4a", "infra", "cell infra"
                tip = f"{task} · iteration {it}: every trial hit an infrastructure error"
            elif state == PENDING:
                fill, label, cls = "#ffffff", "…", "cell pending"
                tip = f"{task} · iteration {it}: pending (still running)"
            else:
                fill, label, cls = "url(#hm-hatch)", "", "cell not-evaluated"
                tip = f"{task} · iteration {it}: not evaluated"
            out.append(f'<g class="{cls}" data-task="{escape(task)}" data-iteration="{it}">'
                       f'<rect x="{cx + 1}" y="{ty + 1}" width="{cw - 2}" height="{ch - 2}" rx="3" fill="{fill}"/>'
                       f'<text x="{cx + cw / 2}" y="{ty + ch / 2 + 4}" text-anchor="middle">{label}</text>')
            if state == "rate" and cell.get("infra"):
                out.append(f'<circle class="infra-dot" cx="{cx + cw - 7}" cy="{ty + 7}" r="3.5"/>')
            out.append(f"<title>{escape(tip)}</title></g>")
    out.append("</svg>")
    return Markup("".join(out))


def heatmap_legend() -> Markup:
    items = [("#1a9850", "all trials passed"), ("#fee08b", "half passed"), ("#d73027", "failed (0)"),
             ("#3b2a4a", "infrastructure error (every trial)"), ("url(#lg-hatch)", "not evaluated"),
             ("#ffffff", "pending")]
    last = "some trials hit infrastructure errors"
    width = sum(30 + 7 * len(label) for _, label in items) + 24 + 7 * len(last)
    out = [f'<svg id="heatmap-legend" class="legend" xmlns="http://www.w3.org/2000/svg" width="{width}" height="24" '
           f'viewBox="0 0 {width} 24"><defs><pattern id="lg-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
           'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f3f3f3"/>'
           '<line x1="0" y1="0" x2="0" y2="6" stroke="#c8c8c8" stroke-width="2"/></pattern></defs>']
    x = 2
    for fill, label in items:
        out.append(f'<rect x="{x}" y="4" width="16" height="16" rx="3" fill="{fill}" stroke="#999"/>'
                   f'<text x="{x + 22}" y="17">{label}</text>')
        x += 30 + 7 * len(label)
    out.append(f'<circle class="infra-dot" cx="{x + 8}" cy="12" r="3.5"/>'
               f'<text x="{x + 18}" y="17">{last}</text></svg>')
    return Markup("".join(out))


# one fixed colour per role of ahe.llm.ROLES (a role not listed there gets one of the extras)
ROLE_COLORS = {"agent": "#4c78a8", "debugger": "#f58518", "evolve": "#54a24b", "explore": "#b279a2",
               "generator": "#9d755d", "reeval": "#72b7b2"}
_EXTRA_COLORS = ["#e45756", "#bab0ac", "#eeca3b", "#ff9da6"]


def role_color(role: str, roles: list[str]) -> str:
    if role in ROLE_COLORS:
        return ROLE_COLORS[role]
    others = [r for r in roles if r not in ROLE_COLORS]
    return _EXTRA_COLORS[others.index(role) % len(_EXTRA_COLORS)] if role in others else "#888"


def token_bars(rows: list[tuple[int, dict[str, int]]], roles: list[str],
               width: int = 720, height: int = 220) -> Markup:
    """Stacked bars: tokens per role per iteration."""
    if not rows:
        return Markup('<p class="pending">pending: no token counts yet</p>')
    top = max(1, max(sum(t.values()) for _, t in rows))
    pw, ph = width - _W_PAD_L - _W_PAD_R, height - _PAD_T - _PAD_B
    bw = min(60, pw / len(rows) * 0.6)
    out = [f'<svg id="token-bars" class="chart" role="img" aria-label="tokens per role per iteration" '
           f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    for f in (0, 0.5, 1):
        yv = _PAD_T + ph * (1 - f)
        out.append(f'<line class="grid" x1="{_W_PAD_L}" x2="{width - _W_PAD_R}" y1="{yv:.1f}" y2="{yv:.1f}"/>'
                   f'<text class="axis" x="{_W_PAD_L - 6}" y="{yv + 4:.1f}" text-anchor="end">{_short(top * f)}</text>')
    for n, (it, toks) in enumerate(rows):
        cx = _W_PAD_L + pw * (n + 0.5) / len(rows)
        yv = _PAD_T + ph
        for role in roles:
            v = toks.get(role, 0)
            if not v:
                continue
            h = ph * v / top
            yv -= h
            out.append(f'<rect x="{cx - bw / 2:.1f}" y="{yv:.1f}" width="{bw:.1f}" height="{h:.1f}" '
                       f'fill="{role_color(role, roles)}"><title>iteration {it} · {escape(role)}: {v:,} tokens</title></rect>')
        out.append(f'<text class="axis" x="{cx:.1f}" y="{height - _PAD_B + 16}" text-anchor="middle">{it}</text>')
    lx = _W_PAD_L
    for role in roles:
        out.append(f'<rect x="{lx}" y="{height - 14}" width="10" height="10" fill="{role_color(role, roles)}"/>'
                   f'<text class="axis" x="{lx + 14}" y="{height - 5}">{escape(role)}</text>')
        lx += 24 + 7 * len(role)
    out.append("</svg>")
    return Markup("".join(out))


def _short(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:.1f}M"
    if v >= 1e3:
        return f"{v / 1e3:.0f}k"
    return f"{v:.0f}"
