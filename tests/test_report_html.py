"""`ahe report`: the HTML dashboard, rendered from a real demo run and loaded in headless Chromium.

The browser (tests/chromium_support.py) records every console message, exception and network
request of the page, the test checks the DOM, and a screenshot is saved under test-artifacts/
(git-ignored). Needs Debian's `chromium` package; skipped with that reason if it is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ahe.report.html import report_command
from tests.chromium_support import ARTIFACTS, assert_inert, load_in_chromium, needs_chromium
from tests.shared_runs import copy_run, line_demo


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    """A real run folder: the demo scenario through `ahe evolve` (3 iterations + final eval), built once
    a session (tests/shared_runs.py); read only: a test that writes into it copies it first."""
    run = line_demo(tmp_path_factory)
    assert (run / "scores.json").exists()
    return run


# ---------------------------------------------------------------- tests
def test_report_file_is_self_contained(demo_run: Path, tmp_path: Path) -> None:
    out = report_command(demo_run, tmp_path / "r" / "report.html", False)
    html = out.read_text()
    assert out.stat().st_size < 200_000
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    assert 'id="pass-curve"' in html and 'id="heatmap"' in html and 'id="sec-timeline"' in html
    # default location: RUN_DIR/report.html, evidence links relative to it
    run = copy_run(demo_run, tmp_path / "run")  # not into the shared run
    default = report_command(run, None, False)
    assert default == run / "report.html"
    assert 'href="iterations/001/corpus/' in default.read_text()


def test_report_shows_the_regression_only_the_replay_foresaw(demo_run: Path, tmp_path: Path) -> None:
    import re

    html = report_command(demo_run, tmp_path / "report.html", False).read_text()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    y = "fix-service-config"
    assert f"replay at risk {y} — corpus/{y}/trial-1/step-003.md: call run_shell_command denied" in text
    assert f"foreseen by replay {y} regressed, as the replay foresaw" in text
    assert "only text changed (LongTermMEMORY.md)" in text  # the lesson: not replayable
    table = text[text.index("Regression foresight"):]
    assert "2 agent 0 0 1 — — 0.00 0.00" in table
    assert "2 replay 1 1 1 1.00 0.33 1.00 0.33" in table and "2 agent ∪ replay 1 1 1 1.00 0.33 1.00 0.33" in table


@needs_chromium
def test_report_loads_in_headless_chromium(demo_run: Path, tmp_path: Path) -> None:
    run = copy_run(demo_run, tmp_path / "run")  # the report goes into RUN_DIR; not into the shared run
    out = report_command(run, None, False)
    shot = ARTIFACTS / "report-demo.png"
    r = load_in_chromium(out, tmp_path, screenshot=shot)
    assert r["console_errors"] == [], r["console_errors"]
    assert r["exceptions"] == [], r["exceptions"]
    assert all(u == out.resolve().as_uri() for u in r["requests"]), r["requests"]
    dom = r["dom"]
    assert dom["curve"] and dom["best"] and dom["curvePoints"] == 4
    assert dom["heatmapCells"] == 3 * 4 and dom["legend"]
    assert any("failed" in c for c in dom["heatmapStates"]) and any("rate" in c for c in dom["heatmapStates"])
    verdicts = {cid.split("-", 2)[2]: v for cid, v in dom["changes"]}
    assert verdicts["chg-1"] == "keep" and verdicts["chg-2"] == "rollback", dom["changes"]
    assert dom["diffs"] >= 2
    assert dom["evidence"] and all(e.startswith("iterations/001/corpus/") for e in dom["evidence"])
    assert all((run / e).exists() for e in dom["evidence"])
    assert dom["predictions"] >= 3 and dom["usage"] >= 5
    assert not dom["transfer"] and dom["scripts"] == 0
    assert not dom["treeSection"] and dom["treeNodes"] == []  # a line run: no search tree section
    # the paper's figures: pass@1 by difficulty (the demo's three tasks are easy: overall + easy lines),
    # the self-attribution of round 2 (chg-1 fixed X as predicted; chg-2 predicted Z, which did not
    # improve; Y regressed unpredicted), calibration, Succ/Mtok per iteration
    assert dom["difficultyLines"] == 2 and "iteration 3 · easy: pass@1 0.667" in dom["difficultyTitles"]
    assert set(dom["attributionBars"]) == {"round 2 · fixes: 1 true positives", "round 2 · fixes: 1 false positives",
                                           "round 2 · regressions: 1 misses"}, dom["attributionBars"]
    assert dom["attributionLine"] == 1 and dom["figuresBox"][0] > 300 and dom["figuresBox"][1] > 100
    assert dom["calibrationRows"][1].split("\t")[:4] == ["fix", "1", "0.50", "0.50"], dom["calibrationRows"]
    assert len(dom["efficiencyRows"]) == 1 + 4 and dom["efficiencyRows"][3].split("\t")[:3] == ["3", "0.667", "0.667"]
    assert shot.exists() and shot.stat().st_size > 10_000


@needs_chromium
def test_half_finished_run_with_hostile_text(demo_run: Path, tmp_path: Path) -> None:
    """A run still going (last results.json and attribution missing), with agent text that tries
    to inject markup and fetch a URL: renders, escapes, nothing runs, nothing is fetched."""
    run = copy_run(demo_run, tmp_path / "run")
    last = max(int(p.name) for p in (run / "iterations").iterdir())
    (run / "iterations" / f"{last:03d}" / "results.json").unlink()
    (run / "iterations" / f"{last:03d}" / "attribution.json").unlink()
    state = json.loads((run / "loop_state.json").read_text())
    state["finished"] = False
    state["done"][f"{last:03d}"] = []
    (run / "loop_state.json").write_text(json.dumps(state))
    scores = json.loads((run / "scores.json").read_text())
    scores["iterations"] = [s for s in scores["iterations"] if s["iteration"] != last]
    (run / "scores.json").write_text(json.dumps(scores))
    mpath = run / "iterations" / "001" / "evolve" / "manifest.json"
    m = json.loads(mpath.read_text())
    evil = '<script>alert(1)</script><img src="http://198.51.100.7/x.png" onerror="alert(2)">'
    m["changes"][0]["summary"] = evil
    m["changes"][0]["failure_evidence"][0]["task"] = evil
    mpath.write_text(json.dumps(m))
    (run / "transfer.json").write_text(json.dumps({"harness": "best", "rows": [
        {"model": "mock-a", "harness_pass_at_1": 0.75, "baseline_pass_at_1": 0.5, "delta_points": 25.0,
         "ci": [10.0, 40.0], "note": evil}]}))
    out = report_command(run, tmp_path / "out" / "report.html", False)
    html = out.read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html
    r = load_in_chromium(out, tmp_path)
    assert_inert(r, out)
    dom = r["dom"]
    assert "<script>alert(1)</script>" in dom["text"]  # shown as text
    assert "pending" in dom["text"] and dom["curve"] and dom["transfer"]
    assert any("pending" in c for c in dom["heatmapStates"])
    # evidence links are relative to the report's own folder
    assert dom["evidence"] and all(e.startswith("../run/iterations/001/corpus/") for e in dom["evidence"])


def test_renders_with_almost_nothing(tmp_path: Path) -> None:
    """A run that has just started: only loop_state.json, an empty iteration folder and a
    half-written scores.json."""
    run = tmp_path / "run"
    (run / "iterations" / "001" / "rollouts").mkdir(parents=True)
    (run / "loop_state.json").write_text(json.dumps({"done": {}, "finished": False}))
    (run / "scores.json").write_text('{"iterations": [')  # being written
    out = report_command(run, None, False)
    html = out.read_text()
    assert "pending" in html and 'id="sec-timeline"' in html


def test_not_a_run_folder(tmp_path: Path) -> None:
    from ahe.errors import AheError

    with pytest.raises(AheError, match="no such run folder"):
        report_command(tmp_path / "nope", None, False)
    with pytest.raises(AheError, match="not a run folder"):
        report_command(tmp_path, None, False)
