"""The bill kept true while the run goes (issue 37): bill.json each phase, the progress line,
budgets announced and checked ahead, the start's forecast against the actual in audit and report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ahe.config import ExperimentConfig
from ahe.evolution.bill import budget_ahead, load_bill
from ahe.run_folder import IterationScore, RunFolder, Scores
from tests.shared_runs import shared_build

AHE = str(Path(sys.executable).parent / "ahe")
PRICE = {"input": 2.0, "output": 8.0, "cached_input": 0.5}


def _demo(tmp_path: Path, name: str, *, iterations: int = 2, budgets: dict | None = None) -> Path:
    from ahe.demo import write_demo

    config = write_demo(tmp_path / name, iterations=iterations)
    cfg = yaml.safe_load(config.read_text())
    cfg["models"]["agent"]["prices"] = {cfg["models"]["agent"]["model"]: PRICE}  # the agent priced, the others not
    if budgets:
        cfg["budgets"] = budgets
    config.write_text(yaml.safe_dump(cfg))
    return config


def _evolve(config: Path, run: Path, *extra: str, quiet: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([AHE, "evolve", str(config), "--run-dir", str(run), *extra, *(["-q"] if quiet else [])],
                         capture_output=True, text=True, cwd=config.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def _two_runs(tmp: Path) -> None:
    config = _demo(tmp, "demo")
    _evolve(config, tmp / "run-a")
    out = _evolve(config, tmp / "run-b", "--from", str(tmp / "run-a"), quiet=False)
    (tmp / "run-b.stderr").write_text(out.stderr)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Run A with the stated defaults; run B of the same config forecast from A (`--from A`), and what B
    printed. Built once a session for every worker (tests/shared_runs.py); read only."""
    tmp = shared_build(tmp_path_factory, "bill-two-runs", _two_runs)
    return tmp / "demo" / "config.yaml", tmp / "run-a", tmp / "run-b", (tmp / "run-b.stderr").read_text()


def test_each_phase_records_spent_and_projection(two_runs):
    _, _, run, stderr = two_runs
    folder = RunFolder(run)
    bill, scores = load_bill(folder), folder.load_scores()
    assert bill is not None and bill.forecast is not None and bill.forecast.source == "run"
    seen = {(e.iteration, e.phase) for e in bill.entries}
    for it in (1, 2):
        assert {(it, "rollout"), (it, "debug"), (it, "evolve")} <= seen  # every round, after each phase that ran
    assert (3, "rollout") in seen  # the final evaluation
    prev = None
    for e in bill.entries:
        total = e.tokens["total"]
        assert total.spent == sum(q.spent for r, q in e.tokens.items() if r != "total")
        for q in (total, e.trials, e.hours, e.cost_usd):
            assert q.projected.low <= q.projected.mid <= q.projected.high
            assert q.projected.low >= q.spent - 1e-6  # the projection is spent plus what is still to run
        if prev is not None:  # spent never goes down
            assert total.spent >= prev.tokens["total"].spent and e.trials.spent >= prev.trials.spent
            assert e.hours.spent >= prev.hours.spent and e.cost_usd.spent >= prev.cost_usd.spent
        prev = e
    last, totals = bill.entries[-1], scores.totals()
    assert last.tokens["total"].spent == totals["tokens"]["total"]  # the final actual is the sum of the rounds
    assert last.tokens["total"].projected.low == last.tokens["total"].projected.high == last.tokens["total"].spent
    assert last.trials.spent == sum(s.n_trials + s.reeval_trials for s in scores.iterations)
    assert last.cost_usd.spent == pytest.approx(totals["cost_usd"]["agent"]) and last.cost_usd.spent > 0
    assert set(last.unpriced_roles) >= {"debugger", "evolve"}  # listed as unpriced, never priced at zero
    # an earlier projection already knew most of the end: after round 1's evolve, within ±25 % of the actual
    mid = next(e for e in bill.entries if (e.iteration, e.phase) == (1, "evolve")).tokens["total"].projected.mid
    assert 0.75 <= totals["tokens"]["total"] / mid <= 1.25
    # forecast from a run of the same config, every projection's interval covers the final actual
    assert all(e.tokens["total"].projected.low <= totals["tokens"]["total"] <= e.tokens["total"].projected.high
               for e in bill.entries)
    lines = [ln for ln in stderr.splitlines() if ln.strip().startswith("bill: ")]  # the progress line
    assert len(lines) == len(bill.entries) and "of" in lines[0] and "finish ~" in lines[0] and "$" in lines[0]


def test_forecast_against_actual_in_audit_and_report(two_runs, tmp_path):
    _, _, run, _ = two_runs
    bill = load_bill(RunFolder(run))
    check = {c.quantity: c for c in bill.check}
    assert {"trials", "tokens:agent", "tokens:total", "cost_usd:agent", "cost_usd", "hours"} <= set(check)
    assert "cost_usd:evolve" not in check  # unpriced: not checked as $0
    assert check["cost_usd:agent"].actual == pytest.approx(scores_cost := RunFolder(run).load_scores().totals()["cost_usd"]["agent"])
    assert scores_cost > 0 and check["cost_usd:agent"].inside
    assert bill.ended == "finished all iterations"
    scores = RunFolder(run).load_scores()
    assert check["tokens:total"].actual == scores.totals()["tokens"]["total"]
    assert check["trials"].inside and check["tokens:total"].inside  # forecast from a run of the same config
    assert 0.75 <= check["tokens:total"].ratio <= 1.25
    js = json.loads(subprocess.run([AHE, "audit", str(run), "--json"], capture_output=True, text=True, check=True).stdout)
    assert [c["quantity"] for c in js["bill"]["check"]] == [c.quantity for c in bill.check]
    text = subprocess.run([AHE, "audit", str(run), "--format", "markdown"], capture_output=True, text=True, check=True).stdout
    assert "Forecast at the start (run:" in text and "| tokens:total |" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| tokens:total |"))
    assert f"{check['tokens:total'].actual:,.0f}" in row and row.rstrip().endswith("| yes |")
    subprocess.run([AHE, "report", str(run), "--out", str(tmp_path / "report.html")], capture_output=True, text=True,
                   check=True)  # not into the shared run
    html = (tmp_path / "report.html").read_text()
    assert 'id="bill-table"' in html and "tokens:total" in html and f"{check['tokens:total'].actual:,.0f}" in html


def test_a_defaults_forecast_is_checked_honestly(two_runs):
    _, run, _, _ = two_runs  # run A: the stated defaults (TB2-sized trials) against a tiny scripted run
    bill = load_bill(RunFolder(run))
    check = {c.quantity: c for c in bill.check}
    assert bill.forecast.source == "defaults"
    assert not check["tokens:total"].inside and check["tokens:total"].ratio < 0.1  # said so, not hidden
    assert "forecast vs actual" in (run / "history.md").read_text()


def test_a_budget_is_announced_before_the_round_that_reaches_it(tmp_path):
    config = _demo(tmp_path, "demo", iterations=3, budgets={"max_tokens": {"total": 60000}})
    run = tmp_path / "run"
    _evolve(config, run)
    folder = RunFolder(run)
    bill, state, scores = load_bill(folder), folder.load_state(), folder.load_scores()
    assert "round boundary" in (state.stopped or "")
    assert scores.totals()["tokens"]["total"] < 60000 and scores.best_pass_at_1 is not None
    announced = [e for e in bill.entries if e.budget]
    assert announced and "token budget of total (60,000) is projected to be reached" in announced[0].budget
    # announced before the stop: an entry after an earlier phase than the last one run
    assert bill.entries.index(announced[0]) < len(bill.entries) - 1
    assert "bill: the token budget of total" in (run / "history.md").read_text()
    assert bill.ended == state.stopped


def test_evolve_from_a_folder_that_is_not_a_run_is_one_sentence(tmp_path):
    config = _demo(tmp_path, "demo")
    (tmp_path / "empty").mkdir()
    for source, says in ((tmp_path / "empty", "no scores.json"), (tmp_path / "nope", "not a folder")):
        out = subprocess.run([AHE, "evolve", str(config), "--run-dir", str(tmp_path / "run"), "--from", str(source), "-q"],
                             capture_output=True, text=True, cwd=tmp_path)
        assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr
        assert not (tmp_path / "run").exists()  # refused before a run folder is made


def _score(it: int, tokens: dict, variant_tokens: int = 0, timings: dict | None = None) -> IterationScore:
    return IterationScore(iteration=it, harness_commit="c", harness_tag="t", pass_at_1=0.5, pass_at_k=0.5, k=1,
                          n_trials=2, n_passed=1, infra_errors=0, tokens=tokens, variant_tokens=variant_tokens,
                          timings_sec=timings or {})


def test_budget_ahead_counts_the_variants_and_the_wall_clock(tmp_path):
    (tmp_path / "t").mkdir()
    cfg = ExperimentConfig(tasks=tmp_path / "t", budgets={"max_tokens": {"agent": 10_000}})
    # iteration 1: rollout 1,000 agent tokens + variants' evaluation 5,000; iteration 2's rollout 1,000
    with_variants = Scores(iterations=[_score(1, {"agent": 6000, "evolve": 100}, 5000), _score(2, {"agent": 1000})])
    assert "would be reached by iteration 2's edits" in budget_ahead(cfg, with_variants, 2, 0.0)  # 7,000 + 5,000 + 1,000
    without = Scores(iterations=[_score(1, {"agent": 6000, "evolve": 100}, 0), _score(2, {"agent": 1000})])
    assert budget_ahead(cfg, without, 2, 0.0) is None  # 7,000 + 1,000: fits
    clock = ExperimentConfig(tasks=tmp_path / "t", budgets={"wall_clock_hours": 1.0})
    slow = Scores(iterations=[_score(1, {}, timings={"debug": 600, "evolve": 1200}), _score(2, {}, timings={"rollout": 900})])
    assert "wall-clock budget of 1.0 h" in budget_ahead(clock, slow, 2, 1000.0)  # 1000 + 2700 s ≥ 3600
    assert budget_ahead(clock, slow, 2, 800.0) is None  # 800 + 2700 < 3600


def test_budget_ahead_keeps_the_held_out_scoring_inside_the_budget(tmp_path):
    (tmp_path / "t").mkdir()
    cfg = ExperimentConfig(tasks=tmp_path / "t", budgets={"max_tokens": {"agent": 10_000}})
    # 7,000 spent + iteration 2's round 1,000 fits; the held-out scoring still owed, 4 trials at
    # iteration 2's 500 agent tokens per trial (2 trials, 1,000), adds 2,000: it would not
    scores = Scores(iterations=[_score(1, {"agent": 6000, "evolve": 100}, 0), _score(2, {"agent": 1000})])
    assert budget_ahead(cfg, scores, 2, 0.0, reserve_trials=2) is None  # 7,000 + 1,000 + 1,000 < 10,000
    said = budget_ahead(cfg, scores, 2, 0.0, reserve_trials=4)
    assert said and "the 4 held-out trials still owed" in said
    clock = ExperimentConfig(tasks=tmp_path / "t", budgets={"wall_clock_hours": 1.0})
    slow = Scores(iterations=[_score(1, {}, timings={"debug": 600, "evolve": 1200}), _score(2, {}, timings={"rollout": 900})])
    assert budget_ahead(clock, slow, 2, 800.0) is None  # 800 + 2700 < 3600
    assert "wall-clock" in budget_ahead(clock, slow, 2, 800.0, reserve_trials=1)  # + 450 s of held-out trials


def test_held_out_trials_still_owed_are_zero_without_a_split_or_once_scored(tmp_path):
    from ahe.evolution.holdout import Split, trials_to_come
    from ahe.run_folder import RunFolder

    (tmp_path / "t").mkdir()
    run = RunFolder(tmp_path / "run")
    split = Split(source="hash", tasks_dir=tmp_path / "t", search_dir=tmp_path / "s", search=["a", "b"], held_out=["c"])
    with_split = ExperimentConfig(tasks=tmp_path / "t", k=3, holdout={})
    assert trials_to_come(ExperimentConfig(tasks=tmp_path / "t"), None, run) == 0
    assert trials_to_come(with_split, split, run) == 6  # seed and best, k 3, one task
    (run.root / "holdout").mkdir(parents=True)
    (run.root / "holdout" / "result.json").write_text("{}")
    assert trials_to_come(with_split, split, run) == 0
