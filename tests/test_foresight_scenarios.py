"""The scripted scenario set with known regressions (docs/foresight.md): the replay sees what
the regression-blind agent does not, pins each regression on the change that caused it, and
raises no alarm for changes that touch nothing."""

from __future__ import annotations

import shutil

import pytest

from tests.foresight_support import measure_scenarios


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (re-execution needs a sandbox)")
def test_union_recall_is_at_least_three_times_the_agents(tmp_path):
    m = measure_scenarios(tmp_path)
    reports, att = m["reports"], m["attribution"]
    assert {cid: r.at_risk for cid, r in reports.items()} == {
        "chg-1": ["hotfix-branch", "repo-cleanup"], "chg-2": ["slow-build"], "chg-3": ["serve-api"],
        "chg-4": [], "chg-5": []}
    assert not reports["chg-5"].replayable and reports["chg-4"].replayable and reports["chg-4"].tasks == []
    assert reports["chg-2"].tasks[0].first.ref == "corpus/slow-build/trial-1/step-004.md"
    assert reports["chg-3"].tasks[0].first.ref == "corpus/serve-api/trial-1/step-003.md"

    agent, replay, union = att.regression_predictions, att.replay_regression_predictions, att.union_regression_predictions
    assert agent.recall == pytest.approx(0.25) and union.recall == pytest.approx(1.0)
    assert union.recall >= 3 * agent.recall
    assert replay.precision == pytest.approx(1.0) and agent.precision == pytest.approx(0.5)
    assert agent.random_recall is not None and union.random_recall is not None
    assert att.pinned_by_replay == {"hotfix-branch": ["chg-1"], "repo-cleanup": ["chg-1"], "serve-api": ["chg-3"],
                                    "slow-build": ["chg-2"]}
    v = {c.change_id: c for c in att.changes}
    assert v["chg-1"].replay_regressions == ["hotfix-branch", "repo-cleanup"]
    assert v["chg-1"].verdict == "rollback" and "foreseen by replay" in v["chg-1"].reason
    assert v["chg-4"].verdict == "inconclusive" and v["chg-4"].unpredicted_regressions == []  # not blamed
    assert v["chg-5"].unpredicted_regressions == []
