"""Text that AHE prints through rich keeps its [brackets]: rich reads `[word]` as markup and
drops it (`pip install 'ahe[ray]'` came out as `pip install 'ahe'`), so paths, names, errors
and model-written text are escaped or passed as Text."""

from __future__ import annotations

import io
import subprocess
import sys

from rich.console import Console

from tests.conftest import REPO


def rendered(renderable) -> str:
    buf = io.StringIO()
    Console(file=buf, width=250).print(renderable)
    return buf.getvalue()


def test_an_error_sentence_keeps_a_path_with_brackets(tmp_path):
    ws = tmp_path / "harness[ray]"
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(ws), "--model", "m",
                           "--tasks", str(REPO / "examples" / "tasks")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"{ws}/agent.yaml: not found" in proc.stderr, proc.stderr


def test_audit_tables_keep_model_written_text_with_brackets():
    from ahe.report.deferrals import deferral_table

    it = {"iteration": 2, "changes": [{"id": "chg-[1]", "deferred_steps": [
        {"judged_by": 3, "verdict": "keep", "confidence": None, "watch_evidence": [],
         "reason": "fixes the [tool] misuse of [bold]cat[/bold]"}]}]}
    out = rendered(deferral_table(it))
    assert "fixes the [tool] misuse of [bold]cat[/bold]" in out and "chg-[1]" in out


def test_the_eval_results_table_keeps_task_names_and_title_with_brackets():
    from ahe.rollout.display import results_table
    from ahe.rollout.metrics import summarize
    from ahe.rollout.models import TrialResult

    res = summarize([TrialResult(task="parse-[csv]", trial=1, passed=True, duration_sec=1.0)], k=1,
                    expected={"parse-[csv]": 1})
    out = rendered(results_table(res, title="ahe eval — runs/x[ray] on tasks"))
    assert "parse-[csv]" in out and "runs/x[ray]" in out
