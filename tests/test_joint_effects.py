"""The joint model credits each task's movement to the change that made it, across every harness
the run evaluated — the confound of "all trials with c against all without c" removed."""

import math

from ahe.evolution.evidence import Counts, Prior
from ahe.evolution.joint import task_effects

PRIOR = Prior(0.5, 0.5)
LOGIT = math.log(0.3 / 0.7)


def test_a_later_change_s_gain_is_not_credited_to_an_earlier_one():
    # round 1: seed; round 2: with a (neutral); rounds 3-5: with a and b (b lifted the task 0.2 -> 0.8)
    states = [(frozenset(), Counts(4, 20)), (frozenset({"a"}), Counts(4, 20)), (frozenset({"a", "b"}), Counts(48, 60))]
    eff = task_effects(states, {"a": LOGIT, "b": LOGIT}, PRIOR)
    assert abs(eff["a"].mean) < 0.05 and eff["a"].p < 0.2
    assert eff["b"].mean > 0.5 and eff["b"].p > 0.9
    # the naive split (with a: 52/80, without a: 4/20) would credit a with +0.45
    naive = (4 + 48) / 80 - 4 / 20
    assert naive > 0.4


def test_changes_never_apart_share_the_movement_by_their_priors():
    states = [(frozenset(), Counts(0, 20)), (frozenset({"a", "b"}), Counts(16, 20))]
    named, unnamed = math.log(0.5 / 0.5), math.log(0.05 / 0.95)
    eff = task_effects(states, {"a": named, "b": unnamed}, PRIOR)
    assert eff["a"].mean > 0.6 and eff["b"].mean < 0.1  # a named the task: it takes most of the credit
    assert abs(eff["a"].p + eff["b"].p - 1) < 0.05  # one of them did it


def test_a_task_that_never_moved_gives_no_effect_and_both_movers_are_seen():
    flat = [(frozenset(), Counts(19, 20)), (frozenset({"a"}), Counts(10, 10)), (frozenset({"a", "b"}), Counts(20, 20))]
    eff = task_effects(flat, {"a": LOGIT, "b": LOGIT}, PRIOR)
    assert all(abs(e.mean) < 0.03 and e.p < 0.3 for e in eff.values())
    # a helped (0.1 -> 0.7), then b hurt (0.7 -> 0.2): both explained by the pair
    both = [(frozenset(), Counts(2, 20)), (frozenset({"a"}), Counts(14, 20)), (frozenset({"a", "b"}), Counts(4, 20))]
    eff = task_effects(both, {"a": LOGIT, "b": LOGIT}, PRIOR)
    assert eff["a"].mean > 0.4 and eff["b"].mean < -0.3


def test_a_change_in_every_state_cannot_be_judged_and_is_left_out():
    states = [(frozenset({"a"}), Counts(3, 10)), (frozenset({"a", "b"}), Counts(9, 10))]
    eff = task_effects(states, {"a": LOGIT, "b": LOGIT}, PRIOR)
    assert "a" not in eff and eff["b"].mean > 0.4
