"""Attribution verdicts and prediction scores on worked scenarios."""

from __future__ import annotations

import pytest

from ahe.evolution.attribution import attribute, flips
from ahe.harness.manifest import ChangeEntry


def change(cid, fixes=(), risks=(), component="long_term_memory"):
    return ChangeEntry(
        id=cid, component=component, files=["LongTermMEMORY.md"], summary="a change", root_cause="some cause",
        targeted_fix="some fix", predicted_fixes=list(fixes), predicted_regressions=list(risks), commit="c" + cid[-1],
        status="accepted",
    )


BEFORE = {"x": 0.0, "y": 1.0, "z": 0.0, "w": 0.5}
AFTER = {"x": 1.0, "y": 0.0, "z": 0.0, "w": 0.5}


def test_flips_use_delta_inclusively():
    assert flips({"a": 0.0, "b": 1.0, "c": 0.5}, {"a": 0.5, "b": 0.5, "c": 0.5}, 0.5) == (["a"], ["b"])
    assert flips({"a": 0.0}, {"a": 0.5}, 0.6) == ([], [])


def test_design_scenario_keep_lesson_rollback_middleware():
    att = attribute([change("chg-1", ["x"]), change("chg-2", ["z"], component="middleware")], BEFORE, AFTER, iteration=2)
    v1, v2 = att.changes
    assert v1.verdict == "keep" and v1.reason.startswith("predicted fix improved: x")
    assert v2.verdict == "rollback"
    assert v2.reason == "predicted fix did not improve; unpredicted regression of y"
    assert att.improved == ["x"] and att.regressed == ["y"]
    fp, rp = att.fix_predictions, att.regression_predictions
    assert (fp.precision, fp.recall) == (0.5, 1.0)
    assert fp.random_precision == pytest.approx(1 / 4) and fp.random_recall == pytest.approx(2 / 4)
    assert rp.precision is None and rp.recall == 0.0 and rp.random_recall == 0.0
    assert att.unpredicted_regressions == ["y"] and att.unpredicted_improvements == []


def test_inconclusive_and_strictness():
    quiet = {"x": 0.0, "y": 1.0, "z": 0.0}
    att = attribute([change("chg-1", ["x"])], quiet, quiet, iteration=2)
    assert att.changes[0].verdict == "inconclusive" and "predicted fix did not improve" in att.changes[0].reason
    att = attribute([change("chg-1", ["x"])], quiet, quiet, iteration=2, strictness="strict")
    assert att.changes[0].verdict == "rollback"
    # strict blames an unpredicted regression even on a change whose fix held
    att = attribute([change("chg-1", ["x"])], BEFORE, AFTER, iteration=2, strictness="strict")
    assert att.changes[0].verdict == "rollback" and "unpredicted regression of y" in att.changes[0].reason
    assert attribute([change("chg-1", ["x"])], BEFORE, AFTER, iteration=2, strictness="lenient").changes[0].verdict == "keep"


def test_predicted_risk_that_happens_and_net_loss():
    before = {"a": 0.0, "b": 1.0, "c": 1.0}
    after = {"a": 1.0, "b": 0.0, "c": 0.0}
    att = attribute([change("chg-1", ["a"], ["b", "c"])], before, after, iteration=3)
    v = att.changes[0]
    assert v.verdict == "rollback" and "predicted regression of b, c" in v.reason
    assert att.regression_predictions.precision == 1.0 and att.regression_predictions.recall == 1.0
    assert attribute([change("chg-1", ["a"], ["b", "c"])], before, after, iteration=3, strictness="lenient").changes[0].verdict == "keep"
