"""Live progress and the results table of a rollout, for people (the `--json` path skips it)."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ahe.rollout.models import RunResults, TrialResult, TrialSpec


class Progress:
    """Trials running / done / passing, infra errors, tokens, cost and an ETA.

    On a terminal it is one live line. Anywhere else (a log file, a pipe) a live line would be
    glued to the next message, so it prints whole summary lines instead: one every
    `summary_every` seconds at most, one when a tenth of the trials more have finished, and a
    last one at the end."""

    def __init__(self, total: int, concurrency: int, console: Console, already_done: int = 0,
                 summary_every: float = 30.0) -> None:
        self.total, self.concurrency, self.console = total, concurrency, console
        self.running = self.done = self.passed = self.infra = self.tokens = 0
        self.already = already_done
        self.cost = 0.0
        self.durations: list[float] = []
        self.nodes: dict[str, list[int]] = {}  # node label → [running, done, passed] (Ray executor)
        self.t0 = time.monotonic()
        self.summary_every = summary_every
        self._last_line = self.t0
        self._last_done = 0
        self.live: Live | None = None
        if console.is_terminal:
            self.live = Live(self._render(), console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> "Progress":
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.update(self._render())
            self.live.__exit__(*exc)
        else:
            self._print_line()

    def _print_line(self) -> None:
        self.console.print(self._render(), soft_wrap=True)
        self._last_line, self._last_done = time.monotonic(), self.done

    def _maybe_print_line(self) -> None:
        """A summary line when enough time passed or a tenth of the trials more finished."""
        step = max(1, self.total // 10)
        if time.monotonic() - self._last_line >= self.summary_every or self.done - self._last_done >= step:
            self._print_line()

    def on_event(self, kind: str, spec: TrialSpec, res: TrialResult | None, node: str | None = None, **_: str) -> None:
        if node is not None:
            row = self.nodes.setdefault(node, [0, 0, 0])
            if kind == "start":
                row[0] += 1
            elif res is not None:
                row[0], row[1], row[2] = max(0, row[0] - 1), row[1] + 1, row[2] + int(res.passed)
        if kind == "start":
            self.running += 1
        elif res is not None:
            self.running -= 1
            self.done += 1
            self.passed += res.passed
            self.infra += res.infra
            self.tokens += res.usage.total_tokens
            self.cost += res.usage.cost_usd or 0.0
            self.durations.append(res.duration_sec)
        if self.live is not None:
            self.live.update(self._render())
        elif res is not None and self.done < self.total:
            self._maybe_print_line()

    def _eta(self) -> str:
        if not self.durations:
            return "?"
        left = self.total - self.done
        avg = sum(self.durations) / len(self.durations)
        return f"{left * avg / self.concurrency:.0f}s"

    def _render(self) -> Text:
        elapsed = time.monotonic() - self.t0
        cost = f"  cost ${self.cost:.4f}" if self.cost else ""
        prior = f" (+{self.already} from before)" if self.already else ""
        text = Text(
            f"trials {self.done}/{self.total}{prior}  running {self.running}  passing {self.passed}  "
            f"infra errors {self.infra}  tokens {self.tokens:,}{cost}  elapsed {elapsed:.0f}s  ETA {self._eta()}"
        )
        for label, (running, done, passed) in sorted(self.nodes.items()):
            text.append(f"\n  node {label}: running {running}  done {done}  passing {passed}")
        return text


def results_table(results: RunResults, title: str = "results") -> Group:
    table = Table(title=title)
    for col in ("task", "pass rate", "passed", f"pass@{results.k}", "infra", "timeouts", "verifier err", "tokens/trial", "s/trial"):
        table.add_column(col, justify="left" if col == "task" else "right")
    for t in results.tasks.values():
        table.add_row(
            t.task,
            f"{t.pass_rate:.2f}",
            f"{t.passed}/{t.trials}",
            f"{t.pass_at_k:.2f}",
            str(t.infra_errors),
            str(t.timeouts),
            str(t.verifier_errors),
            f"{t.mean_tokens:,.0f}",
            f"{t.mean_duration_sec:.1f}",
        )
    cost = f", cost ${results.usage.cost_usd:.4f}" if results.usage.cost_usd else ""
    missing = f", {results.missing_trials} trials not run" if results.missing_trials else ""
    totals = Text(
        f"pass@1 {results.pass_at_1:.3f} ({results.n_passed}/{results.n_trials})  pass@{results.k} {results.pass_at_k:.3f}  "
        f"infra errors {results.infra_errors}  timeouts {results.timeouts}  verifier errors {results.verifier_errors}  "
        f"tokens {results.usage.total_tokens:,}{cost}{missing}"
    )
    from ahe.tasks.sources.swe_ci.summary import swe_ci_line

    from ahe.tables import optional

    optional(table, "s/trial", "verifier err", "timeouts", "tokens/trial")  # when the screen is narrow
    swe_ci = swe_ci_line(results.reward_means)
    return Group(table, totals, Text(swe_ci)) if swe_ci else Group(table, totals)
