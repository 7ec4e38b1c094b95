"""The SWE-CI formulas, each against hand-computed values (docs/swe-ci.md)."""

from __future__ import annotations

import pytest

from ahe.tasks.sources.swe_ci import metrics as m
from ahe.tasks.sources.swe_ci.layout import CISettings
from ahe.tasks.sources.swe_ci.rounds import RoundRecord, failing_summary, final_rewards


def test_n_counts_only_target_tests_that_pass():
    statuses = {"a": "passed", "b": "failed", "c": "passed", "extra": "passed"}
    assert m.n_pass(statuses, ["a", "b", "c", "d"]) == 2


@pytest.mark.parametrize(
    ("n", "expected"),
    [(4, 0.0), (10, 1.0), (0, -1.0), (7, 0.5), (5, 1 / 6), (2, -0.5), (3, -0.25)],
)
def test_normalized_change(n, expected):
    # n(c0) = 4, n(c*) = 10: up-moves are over the gap 6, down-moves over n(c0) = 4
    assert m.normalized_change(n, 4, 10) == pytest.approx(expected)


def test_normalized_change_needs_a_gap():
    with pytest.raises(ValueError, match="n\\(c\\*\\) > n\\(c0\\)"):
        m.normalized_change(3, 5, 5)


def test_evoscore_gamma_1_is_the_mean_and_gamma_2_weights_late_rounds():
    seq = [0.5, -0.25, 1.0]
    assert m.evoscore(seq, 1.0) == pytest.approx((0.5 - 0.25 + 1.0) / 3)
    # weights 2, 4, 8
    assert m.evoscore(seq, 2.0) == pytest.approx((2 * 0.5 + 4 * -0.25 + 8 * 1.0) / 14)


def test_evoscore_pads_an_early_stop_with_the_last_codebase():
    assert m.padded([1 / 3, 1.0], 3) == [1 / 3, 1.0, 1.0]
    assert m.evoscore([1 / 3, 1.0], 1.0, rounds=3) == pytest.approx(7 / 9)
    assert m.evoscore([1 / 3, 1.0], 2.0, rounds=3) == pytest.approx((2 / 3 + 4 + 8) / 14)
    with pytest.raises(ValueError, match="gamma >= 1"):
        m.evoscore([1.0], 0.5)


def test_regressions_and_zero_regression():
    before = {"a": "passed", "b": "passed", "c": "failed"}
    after = {"a": "passed", "b": "failed", "c": "passed"}
    assert m.regressions(before, after) == ["b"]
    assert m.regressions(before, {"a": "passed"}) == ["b"]  # a test that vanished does not pass
    assert m.zero_regression([[], [], []]) == 1.0
    assert m.zero_regression([[], ["b"], []]) == 0.0
    assert m.solved([0.2, 1.0]) == 1.0 and m.solved([0.2, 0.9]) == 0.0


def test_final_rewards_of_a_ci_trial():
    expected = {"n_base": 2, "n_target": 7, "target_tests": []}
    recs = [RoundRecord(round=1, a=0.4, n_pass=4, failing=3),
            RoundRecord(round=2, a=0.4, n_pass=4, failing=3, regressions=["t.to_feet"]),
            RoundRecord(round=3, a=0.8, n_pass=6, failing=1)]
    r = final_rewards(recs, CISettings(rounds=3, gamma=2.0), expected)
    assert r["reward"] == r["normalized_change"] == 0.8
    assert r["evoscore_gamma_1"] == pytest.approx(1.6 / 3)
    assert r["evoscore"] == pytest.approx(8.8 / 14)
    assert r["zero_regression"] == 0.0 and r["solved"] == 0.0 and r["rounds"] == 3.0


def test_failing_summary_lists_the_target_tests_that_do_not_pass():
    statuses = {"tests": {"t1": "passed", "t2": "failed"}, "messages": {"t2": "Traceback\nAssertionError: 1 != 2"}}
    text, n = failing_summary(statuses, {"target_tests": ["t1", "t2", "t3"]})
    assert n == 2
    assert "1 of 3 target tests pass" in text
    assert "- t2: failed — AssertionError: 1 != 2" in text
    assert "- t3: not collected" in text


def test_ci_table_is_validated_with_the_file_and_field(tmp_path):
    from ahe.errors import ConfigError
    from ahe.tasks.sources.swe_ci.rounds import ci_settings

    (tmp_path / "task.toml").write_text("[task]\nname = 'x'\n")
    assert ci_settings(tmp_path) is None
    (tmp_path / "task.toml").write_text("[ci]\nrounds = 3\ngamma = 2.0\n")
    assert ci_settings(tmp_path) == CISettings(rounds=3, gamma=2.0)
    (tmp_path / "task.toml").write_text("[ci]\nrounds = 0\n")
    with pytest.raises(ConfigError, match=r"task.toml: \[ci\] rounds .*greater than or equal to 1"):
        ci_settings(tmp_path)
    (tmp_path / "task.toml").write_text("[ci]\nrounds = 2\ngamma = 0.5\n")
    with pytest.raises(ConfigError, match=r"\[ci\] gamma"):
        ci_settings(tmp_path)
