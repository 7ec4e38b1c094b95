"""The bill of a search tree (issue 36): bill.json's last entry counts the finalists' re-evaluation,
which runs after the loop's last phase (ahe/evolution/tree/finish.py) — on `ahe demo DIR --search
tree` 72 trials, as many as ran (before: 60, the last phase's entry)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ahe.evolution.bill import load_bill
from ahe.rollout.models import RunResults
from ahe.run_folder import RunFolder

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def test_the_bill_s_last_entry_counts_the_tree_s_final_re_evaluation(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "demo", str(tmp_path / "demo"), "--search", "tree"],
                          capture_output=True, text=True, timeout=600, env={"COLUMNS": "250", **__import__("os").environ})
    assert proc.returncode == 0, proc.stderr
    run = Path(proc.stdout.strip())
    folder = RunFolder(run)
    bill, scores = load_bill(folder), folder.load_scores()
    trials = [p for p in run.glob("**/trial-*/result.json") if "workspace" not in p.parts]
    final = [p for p in trials if p.relative_to(run).parts[0] == "tree-final"]
    assert len(final) == 12 and len(trials) == 72  # two finalists × 3 tasks × k=2, after the 60 of the rounds
    last = bill.entries[-1]
    assert last.phase == "end" and last.trials.spent == 72 and bill.entries[-2].trials.spent == 60
    assert last.trials.projected.low == last.trials.projected.high == 72  # nothing left to run at the end
    # the finalists' tokens: in scores.json (set from their folders) and billed as agent trials
    finalists = sum(RunResults.model_validate_json((run / "tree-final" / nid / "results.json").read_text()).usage.total_tokens
                    for nid in json.loads((run / "tree.json").read_text())["finalists"])
    totals = scores.totals()["tokens"]
    assert finalists > 0 and totals["finalists"] == finalists
    every = sum(RunResults.model_validate_json(p.read_text()).usage.total_tokens for p in run.glob("**/results.json")
                if "workspace" not in p.parts and "holdout" not in p.parts)
    assert last.tokens["agent"].spent == totals["agent"] + finalists == every  # every evaluation's tokens, once
    assert last.tokens["total"].spent == totals["total"]
    check = {c.quantity: c for c in bill.check}
    assert check["trials"].actual == 72 and check["tokens:agent"].actual == every
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip().startswith("bill: ")]
    assert len(lines) == len(bill.entries) and " 72 of 72 (72–72) trials" in lines[-1]
