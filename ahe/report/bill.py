"""The bill in `ahe audit` and `ahe report`: spent so far, the projected total, and the forecast
made at the start against the actual (bill.json, ahe.evolution.bill; docs/audit.md)."""

from __future__ import annotations

from typing import Any

from ahe.evolution.bill import load_bill, words
from ahe.run_folder import RunFolder


def _num(quantity: str, x: float) -> str:
    if quantity.startswith("cost_usd"):
        return f"${x:,.2f}"
    if quantity == "hours":
        return f"{x:.3f} h"
    return f"{x:,.0f}"


def bill_summary(run: RunFolder) -> dict[str, Any] | None:
    """What audit and report show; None for a run without bill.json (an older AHE's run)."""
    bill = load_bill(run)
    if bill is None:
        return None
    last = bill.entries[-1] if bill.entries else None
    fc = bill.forecast
    rows = [{"quantity": c.quantity, "forecast": _num(c.quantity, c.forecast.mid),
             "interval": f"{_num(c.quantity, c.forecast.low)}–{_num(c.quantity, c.forecast.high)}",
             "actual": _num(c.quantity, c.actual), "ratio": c.ratio, "inside": c.inside} for c in bill.check]
    return {
        "forecast_source": f"{fc.source}: {fc.source_detail}" if fc else None,
        "forecast_budget": fc.budget.reason if fc else None,
        "latest": last.model_dump() if last else None,
        "latest_words": words(last) if last else None,
        "latest_at": (f"after iteration {last.iteration}'s {last.phase}" if last.phase != "end" else "at the end of the run")
        if last else None,
        "budget_projected": last.budget if last else None,
        "entries": len(bill.entries),
        "ended": bill.ended,
        "check": [c.model_dump() for c in bill.check],
        "check_rows": rows,
        "inside": sum(c.inside for c in bill.check),
    }


def render_bill(summary: dict[str, Any] | None, console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    if summary is None:
        return
    console.print()
    console.print("[bold]The bill[/] (bill.json)")
    if summary["latest_words"]:
        console.print(escape(f"  {summary['latest_at']}: {summary['latest_words']}"), highlight=False)
    if summary["budget_projected"]:
        console.print(f"  [yellow]{escape(summary['budget_projected'])}[/]")
    if not summary["check_rows"]:
        if summary["forecast_source"]:
            console.print(escape(f"  forecast at the start from {summary['forecast_source']}; checked against the "
                                 "actual when the run ends"), highlight=False)
        return
    t = Table(title=f"Forecast at the start ({summary['forecast_source']}) against the actual — "
                    f"{summary['inside']} of {len(summary['check_rows'])} inside the interval")
    for col in ("quantity", "forecast", "interval", "actual", "actual / forecast", "inside"):
        t.add_column(col, justify="left" if col == "quantity" else "right")
    for r in summary["check_rows"]:
        t.add_row(r["quantity"], r["forecast"], r["interval"], r["actual"], "—" if r["ratio"] is None else f"{r['ratio']:.3g}",
                  "[green]yes[/]" if r["inside"] else "[red]no[/]")
    console.print(t)
    if summary["ended"] and summary["ended"] != "finished all iterations":
        console.print(escape(f"  the run ended early ({summary['ended']}): the actual covers fewer phases than the forecast"))
