"""`concurrency` bounds a whole tree round (issue 36): a round's children are evaluated side by side,
and on the local executor they share one limit — never more than `concurrency` trials at once over
all of them (before, each child had its own, so width × concurrency could run together). Read from
the trials themselves: each result.json's `started_at` to the moment it was written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from ahe.demo import write_demo
from ahe.rollout.models import TrialResult

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def most_at_once(trials: list[Path]) -> int:
    """The most trials running at the same moment (a trial ends before another starts at that instant)."""
    events = []
    for p in trials:
        start = datetime.fromisoformat(TrialResult.model_validate_json(p.read_text()).started_at).timestamp()
        events += [(start + 0.002, 1), (p.stat().st_mtime, -1)]  # started_at is cut to the millisecond
    now = peak = 0
    for _, step in sorted(events):
        now += step
        peak = max(peak, now)
    return peak


def test_a_tree_round_s_children_share_one_concurrency_limit(tmp_path):
    cfg = write_demo(tmp_path, iterations=1, search="tree")
    cfg.write_text(cfg.read_text().replace("concurrency: 4", "concurrency: 2"))
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "evolve", str(cfg), "--run-dir", str(tmp_path / "run"), "-q"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "250"})
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "run"
    children = [sorted(run.glob(f"iterations/001/tree/{c}/rollouts/*/trial-*/result.json")) for c in ("c1", "c2")]
    assert [len(c) for c in children] == [6, 6]  # both children evaluated, side by side
    assert most_at_once(children[0] + children[1]) == 2  # concurrency over the round, reached and never passed
    every = [p for p in run.glob("**/trial-*/result.json") if "workspace" not in p.parts]
    assert len(every) > 12 and most_at_once(every) <= 2  # and over the whole run (line rollouts, merge, finalists)
