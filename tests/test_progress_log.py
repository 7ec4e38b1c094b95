"""Progress written to a log file or a pipe comes as whole lines, never a live line glued to the next message."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from ahe.rollout.display import Progress
from ahe.rollout.models import TrialResult, TrialSpec


def test_progress_in_a_log_prints_whole_summary_lines():
    buf = io.StringIO()
    console = Console(file=buf, width=60)  # not a terminal, and narrower than the summary line
    assert not console.is_terminal
    spec = TrialSpec(task_dir=Path("t"), task_name="t", trial=1, trial_dir=Path("d"), workspace=Path("w"))
    with Progress(20, 2, console, summary_every=3600) as progress:
        for i in range(20):
            progress.on_event("start", spec, None)
            progress.on_event("end", spec, TrialResult(task="t", trial=i + 1, passed=i % 2 == 0, duration_sec=1.0))
    console.print("iteration 1 — debug")
    lines = buf.getvalue().splitlines()
    summaries = [ln for ln in lines if ln.startswith("trials ")]
    # every summary is one whole line (no wrapping), a tenth of the trials apart, and the last one is final
    assert all(ln.rstrip().endswith(("s", "?")) and "ETA" in ln for ln in summaries), lines
    assert [ln.split()[1] for ln in summaries] == ["2/20", "4/20", "6/20", "8/20", "10/20", "12/20", "14/20",
                                                   "16/20", "18/20", "20/20"]
    assert "passing 10" in summaries[-1]
    assert lines[-1] == "iteration 1 — debug"
