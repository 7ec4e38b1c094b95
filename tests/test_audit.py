"""`ahe audit` on the run folder of the demo scenario (see ahe/demo.py, tests/test_loop_e2e.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from ahe.demo import X, Y, Z
from ahe.errors import AheError
from ahe.report.audit import audit_command, build_audit
from tests.shared_runs import line_demo

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
REPO = Path(__file__).resolve().parents[1]


def demo_run_dir(tmp_path_factory) -> Path:
    """The demo scenario's run folder, made once per test session and shared by every worker
    (tests/shared_runs.py; with tests/test_diff.py, test_tables.py, test_report_html.py …); read only."""
    return line_demo(tmp_path_factory)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    return demo_run_dir(tmp_path_factory)


def ahe(*args: str) -> subprocess.CompletedProcess:
    code = "import sys; from ahe.report.audit import audit_command; sys.exit(audit_command(*sys.argv[1:2], None if sys.argv[2] == '-' else int(sys.argv[2]), sys.argv[3] == 'json'))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, cwd=REPO, check=False,
                          env={**os.environ, "COLUMNS": "250"})


def test_audit_json_reproduces_the_scenario(demo_run, capsys):
    assert audit_command(demo_run, None, True) == 0
    a = json.loads(capsys.readouterr().out)
    it1 = a["iterations"][0]
    assert it1["iteration"] == 1 and it1["judged_by"] == 2 and it1["manifest"] == "final"
    c = {ch["id"]: ch for ch in it1["changes"]}
    assert c["chg-1"]["verdict"] == "keep" and c["chg-1"]["reason"] == f"predicted fix improved: {X}"
    assert c["chg-1"]["component"] == "long_term_memory" and c["chg-1"]["files"] == ["LongTermMEMORY.md"]
    assert c["chg-1"]["predicted_fixes"] == {X: "improved"} and c["chg-1"]["rollback_commit"] is None
    assert c["chg-2"]["verdict"] == "rollback"
    assert c["chg-2"]["reason"] == f"predicted fix did not improve; regression of {Y} foreseen by replay"
    assert c["chg-2"]["predicted_fixes"] == {Z: "no change"} and c["chg-2"]["unpredicted_regressions_blamed"] == []
    # regression foresight: only the replay saw Y coming, and the regression is pinned on chg-2 alone
    assert c["chg-2"]["predicted_regressions"] == {} and c["chg-2"]["replay_at_risk"] == {Y: "regressed"}
    assert c["chg-2"]["replay_regressions"] == [Y] and c["chg-2"]["replay"]["kinds"] == ["middleware"]
    assert c["chg-2"]["replay"]["first_steps"][Y].startswith(f"corpus/{Y}/trial-1/step-003.md: call run_shell_command denied")
    assert c["chg-1"]["replay"]["replayable"] is False and c["chg-1"]["replay_at_risk"] == {}
    assert it1["pinned_by_replay"] == {Y: ["chg-2"]}
    repo = git.Repo(demo_run / "workspace")
    assert c["chg-2"]["rollback_commit"] == repo.commit("iter-002").hexsha and c["chg-2"]["rollback_method"] == "git revert"
    assert it1["improved"] == [X] and it1["regressed"] == [Y]
    fp, rp = it1["fix_predictions"], it1["regression_predictions"]
    assert (fp["precision"], fp["recall"]) == (0.5, 1.0)
    assert fp["random_precision"] == pytest.approx(1 / 3) and fp["random_recall"] == pytest.approx(2 / 3)
    assert (rp["precision"], rp["recall"]) == (None, 0.0)
    # the numbers are exactly attribution.json's
    att = json.loads((demo_run / "iterations" / "002" / "attribution.json").read_text())
    assert fp == att["fix_predictions"] and rp == att["regression_predictions"]
    for key in ("replay_regression_predictions", "union_regression_predictions"):
        assert (it1[key]["precision"], it1[key]["recall"]) == (1.0, 1.0) and it1[key] == att[key]
        assert it1[key]["random_recall"] == pytest.approx(1 / 3)

    ov = a["overall"]
    assert (ov["fix_predictions"]["precision"], ov["fix_predictions"]["recall"]) == (0.5, 1.0)
    assert ov["fix_predictions"]["random_precision"] == pytest.approx(1 / 3)
    assert ov["fix_predictions"]["random_recall"] == pytest.approx(2 / 3)
    assert (ov["regression_predictions"]["precision"], ov["regression_predictions"]["recall"]) == (None, 0.0)
    assert (ov["union_regression_predictions"]["recall"], ov["union_regression_predictions"]["iterations"]) == (1.0, 1)
    comp = a["components"]
    assert comp["long_term_memory"]["kept"] == 1 and comp["long_term_memory"]["keep_rate"] == 1.0
    assert comp["middleware"]["rolled_back"] == 1 and comp["middleware"]["keep_rate"] == 0.0
    assert [i["iteration"] for i in a["iterations"]] == [1, 2, 3, 4]
    assert a["iterations"][3]["final_evaluation"] and a["iterations"][3]["changes"] == []
    assert a["finished"] and a["best_iteration"] == 3


def row_cells(text: str, first_cell: str) -> str:
    """The cells of a (multi-line) rich table row, each column's lines joined, columns joined by " | "."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"│ {first_cell} "))
    block = []
    for ln in lines[start:]:
        if not ln.startswith("│"):
            break
        block.append([c.strip() for c in ln.strip("│").split("│")])
    cols = [" ".join(b[i] for b in block if b[i]) for i in range(len(block[0]))]
    return " | ".join(cols)


def test_human_table_says_the_same(demo_run):
    proc = ahe(str(demo_run), "-", "table")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    rows = {cid: row_cells(text, cid) for cid in ("chg-1", "chg-2")}
    assert "keep" in rows["chg-1"] and "long_term_memory" in rows["chg-1"] and f"{X}: improved" in rows["chg-1"]
    assert "rollback" in rows["chg-2"] and "middleware" in rows["chg-2"] and f"{Z}: no change" in rows["chg-2"]
    assert f"regression of {Y} foreseen by replay" in rows["chg-2"]
    folded = rows["chg-2"].replace(" ", "")  # rich folds long cells at any character
    assert f"{Y}:regressedcorpus/{Y}/trial-1/step-003.md:callrun_shell_commanddenied" in folded
    assert git.Repo(demo_run / "workspace").commit("iter-002").hexsha[:10] in rows["chg-2"]
    fix_rows = [ln for ln in text.splitlines() if ln.startswith("│ fix ")]
    # iteration 1's table and the overall table: predicted 2, happened 1, hits 1, P 0.50 (0.33), R 1.00 (0.67)
    assert sum(ln.split() == ["│", "fix", "│", "2", "│", "1", "│", "1", "│", "0.50", "│", "0.33", "│", "1.00", "│", "0.67", "│"]
               for ln in fix_rows) == 2
    reg = next(ln.split() for ln in text.splitlines() if ln.startswith("│ regression (agent) "))
    assert reg == ["│", "regression", "(agent)", "│", "0", "│", "1", "│", "0", "│", "n/a", "│", "n/a", "│", "0.00", "│", "0.00", "│"]
    union = next(ln.split() for ln in text.splitlines() if ln.startswith("│ regression (agent ∪ replay) "))
    assert union[5:] == ["│", "1", "│", "1", "│", "1", "│", "1.00", "│", "0.33", "│", "1.00", "│", "0.33", "│"]
    comp = {ln.split()[1]: ln.split() for ln in text.splitlines() if ln.startswith(("│ middleware", "│ long_term_memory"))}
    # columns: changes, kept, rolled back, inconclusive, deferred, rejected, pending, keep rate
    assert comp["middleware"][1:] == ["middleware", "│", "1", "│", "0", "│", "1", "│", "0", "│", "0", "│", "0", "│", "0", "│", "0.00", "│"]
    assert comp["long_term_memory"][1:] == ["long_term_memory", "│", "1", "│", "1", "│", "0", "│", "0", "│", "0", "│", "0", "│", "0", "│", "1.00", "│"]


def test_iteration_filter_and_bad_input(demo_run, capsys, tmp_path):
    assert audit_command(demo_run, 1, True) == 0
    a = json.loads(capsys.readouterr().out)
    assert [i["iteration"] for i in a["iterations"]] == [1]
    with pytest.raises(AheError, match="--iteration 9"):
        build_audit(demo_run, 9)
    with pytest.raises(AheError, match="no such run folder"):
        build_audit(tmp_path / "nope")


def test_a_run_still_going_is_pending(demo_run, tmp_path):
    """A copy of the run as it looked during iteration 2's evolve phase: nothing judged yet."""
    run = tmp_path / "run"
    shutil.copytree(demo_run, run, ignore=shutil.ignore_patterns("rollouts", "corpus", "workspace"))
    for it in ("003", "004"):
        shutil.rmtree(run / "iterations" / it)
    (run / "iterations" / "002" / "attribution.json").unlink()
    (run / "iterations" / "002" / "rollback.json").unlink()
    m = run / "iterations" / "002" / "evolve" / "manifest.json"
    m.rename(m.with_name("manifest.partial.json"))
    a = build_audit(run)
    ch = a["iterations"][0]["changes"]
    assert [c["verdict"] for c in ch] == ["pending", "pending"]
    assert ch[0]["predicted_fixes"] == {X: "pending"} and a["iterations"][0]["fix_predictions"] is None
    assert a["iterations"][1]["manifest"] == "partial"
    assert a["overall"]["fix_predictions"]["precision"] is None
    assert a["components"]["middleware"]["pending"] == 1


def test_audit_figures_of_the_paper(demo_run, capsys):
    """pass@1 by difficulty, Succ/Mtok per iteration, per-round self-attribution, mean vs pooled calibration."""
    from ahe.report.efficiency import load_trials

    assert audit_command(demo_run, None, True) == 0
    fig = json.loads(capsys.readouterr().out)["figures"]
    assert fig["difficulties"] == ["easy"]  # the demo's three tasks are all easy
    rows = {r["iteration"]: r for r in fig["per_iteration"]}
    assert [rows[i]["pass_at_1"] for i in (1, 2, 3, 4)] == pytest.approx([1 / 3, 1 / 3, 2 / 3, 2 / 3])
    assert rows[3]["by_difficulty"]["easy"]["pass_at_1"] == pytest.approx(2 / 3)
    trials = load_trials(demo_run / "iterations/003")
    tokens = sum(t.usage.total_tokens for t in trials)
    assert rows[3]["successes_per_mtok"] == pytest.approx(4 * 1e6 / tokens)
    assert rows[3]["tokens_per_trial"] == pytest.approx(tokens / 6)
    [r2] = fig["self_attribution"]
    assert r2["iteration"] == 2 and r2["changes_of"] == 1 and r2["pass_at_1"] == pytest.approx(1 / 3)
    assert r2["fix_predictions"] | {} == {**r2["fix_predictions"], "true_positives": 1, "false_positives": 1, "misses": 0}
    assert (r2["regression_predictions"]["true_positives"], r2["regression_predictions"]["misses"]) == (0, 1)
    cal = fig["calibration"]["fix_predictions"]
    assert cal["rounds"] == 1 and cal["mean_precision"] == cal["pooled_precision"] == 0.5
    proc = ahe(str(demo_run), "-", "table")
    assert "Self-attribution per round" in proc.stdout and "Calibration across iterations" in proc.stdout
    assert "succ./Mtok" in proc.stdout
