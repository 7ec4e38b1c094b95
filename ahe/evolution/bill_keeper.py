"""The loop's keeping of bill.json (the numbers: ahe.evolution.bill; docs/cli.md "The bill while it
runs"): the forecast when a run starts, an entry after every phase (its progress line, and the
first budget its projection reaches in history.md), and at the end the last entry and the start's
forecast put against the actual."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ahe.config import ExperimentConfig
from ahe.evolution.bill import bill_entry, check_forecast, load_bill, save_bill, start_bill, words
from ahe.run_folder import LoopState, RunFolder, Scores


class BillKeeper:
    def __init__(self, cfg: ExperimentConfig, run: RunFolder, console: Console) -> None:
        self.cfg, self.run, self.console = cfg, run, console
        self.tasks = 0  # how many tasks the run has (all of them, a held-out split too); 0: no bill kept

    def open(self, tasks_root: Path, forecast_from: Path | None) -> None:
        """The forecast at the start (`forecast_from`: measured on that run); kept as it is on a resume."""
        from ahe.evolution.forecast import count_tasks

        cfg = self.cfg.model_copy(update={"tasks": tasks_root})
        self.tasks = count_tasks(cfg)[0]
        if load_bill(self.run) is None and not any(self.run.load_state().done.values()):
            bill = start_bill(self.run, cfg, forecast_from)
            fc = bill.forecast
            if fc is not None:
                self.console.print(escape(f"forecast ({fc.source}): {fc.trials.total.mid:.0f} trials, {fc.total_tokens.mid:,.0f} "
                                          f"tokens ({fc.total_tokens.low:,.0f}–{fc.total_tokens.high:,.0f}), "
                                          f"{fc.hours.mid:.2f} h; budgets: {fc.budget.reason}"), highlight=False)

    def after_phase(self, scores: Scores, state: LoopState, elapsed_sec: float, it: int, phase: str) -> None:
        bill = load_bill(self.run)
        if bill is None or not self.tasks:
            return
        entry = bill_entry(self.cfg, self.run, scores, state.done, elapsed_sec, it, phase, bill.costs, tasks=self.tasks)
        before = bill.entries[-1].budget if bill.entries else None
        bill.entries.append(entry)
        save_bill(self.run, bill)
        self.console.print(escape(f"  {words(entry)}"), highlight=False)
        if entry.budget and entry.budget != before:
            self.console.print(f"[yellow]{escape(entry.budget)}[/]")
            self.run.history(f"  - bill: {entry.budget} (after iteration {it}'s {phase})")
            self.run.event("budget_ahead", iteration=it, phase=phase, reason=entry.budget)

    def close(self, scores: Scores, state: LoopState, elapsed_sec: float, reason: str) -> None:
        bill = load_bill(self.run)
        if bill is None or bill.forecast is None or not self.tasks:
            return
        # the last entry: what ran after the last phase too (the tree's finalists, the held-out scoring)
        last = bill_entry(self.cfg, self.run, scores, state.done, elapsed_sec, 0, "end", bill.costs, tasks=self.tasks, ended=True)
        bill.check, bill.ended = check_forecast(bill.forecast, last), reason
        bill.entries.append(last)
        save_bill(self.run, bill)
        self.console.print(escape(f"  {words(last)}"), highlight=False)
        inside = sum(c.inside for c in bill.check)
        tok = next(c for c in bill.check if c.quantity == "tokens:total")
        self.run.history(f"  - forecast vs actual: {inside} of {len(bill.check)} quantities inside the start's interval; "
                         f"tokens {tok.actual:,.0f} against {tok.forecast.mid:,.0f} ({tok.forecast.low:,.0f}–{tok.forecast.high:,.0f})")
