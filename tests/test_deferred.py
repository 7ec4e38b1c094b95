"""Deferred verdicts of the noise policy (docs/decisions.md): a change whose evidence is promising
but not decisive stays in the harness and is judged again as its tasks accumulate trials."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ahe.evolution.deferred import MAX_DEFER, Pending, rejudge
from ahe.evolution.evidence import Counts, Ledger, Prior
from ahe.evolution.noise import Replay
from ahe.run_folder import ChangeVerdict
from ahe.simulate.world import TrueChange, World, task_names
from tests.test_simulate import _KillAfter, _Killed, _loop, _Recording, _run


def _slow_world() -> World:
    """One change with a real but modest effect (one task 0.02 → 0.62): one round of two trials
    and a small re-evaluation budget cannot show it on seed 2; the next round with its re-evaluation trials can."""
    names = task_names(16)
    base = {t: (0.02 if i < 6 else 0.98) for i, t in enumerate(names)}
    w = World(seed=2, cap=0.97, base=base)
    c = TrueChange(uid="c001-1-slow", iteration=1, index=0, kind="beneficial", effects={names[0]: 0.6},
                   predicted_fixes=[names[0]])
    w.changes[c.uid] = c
    return w


def _history(run: Path) -> list[tuple[int, str, str, int | None, int]]:
    out = []
    for att in sorted(run.glob("iterations/*/attribution.json")):
        d = json.loads(att.read_text())
        out += [(d["iteration"], v["change_id"], v["verdict"], v["change_iteration"], v["deferred_rounds"])
                for v in d["changes"] + d["rejudged"]]
    return out


def test_a_deferred_change_is_kept_once_the_evidence_arrives(tmp_path: Path) -> None:
    loop = _loop(tmp_path, _slow_world(), "noise", iterations=4, reeval_share=0.25)
    _run(loop)
    run = loop.run.root
    assert _history(run) == [(2, "chg-1", "deferred", None, 1), (3, "chg-1", "keep", 1, 1)]
    first = json.loads((run / "iterations" / "002" / "attribution.json").read_text())["changes"][0]
    assert first["watch_tasks"] == ["sim-task-001"] and first["confidence"] is not None
    again = json.loads((run / "iterations" / "003" / "attribution.json").read_text())["rejudged"][0]
    w = again["watch_evidence"][0]
    assert w["task"] == "sim-task-001" and w["p_up"] >= 0.99 and w["with_change"][1] >= 2 and w["without"][1] >= 2
    # its evidence came from later rounds and re-evaluation trials with and without it
    assert list(run.glob("iterations/003/reeval/sim-task-001/base-002-without-001-chg-1/trial-*/result.json"))
    markers = subprocess.run(["git", "-C", str(loop.run.workspace), "ls-tree", "--name-only", "final:sim"],
                             capture_output=True, text=True).stdout.split()
    assert markers == ["c001-1-slow.md"]
    shown = subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(run)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "COLUMNS": "300"})
    assert shown.returncode == 0 and "Deferred verdicts" in shown.stdout and "after 1 deferred round" in shown.stdout
    audit = json.loads(subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(run), "--json"],
                                      capture_output=True, text=True, timeout=120).stdout)
    row = audit["iterations"][0]["changes"][0]
    assert row["verdict"] == "keep" and [s["verdict"] for s in row["deferred_steps"]] == ["keep"]
    report = subprocess.run([sys.executable, "-m", "ahe.cli", "report", str(run)], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0 and "deferred verdict" in (run / "report.html").read_text()
    assert "judged again: keep" in (run / "history.md").read_text()


def test_deferral_resumes_after_a_kill_and_never_reruns_a_finished_trial(tmp_path: Path) -> None:
    world = _slow_world()
    whole = _loop(tmp_path / "a", world, "noise", iterations=4, reeval_share=0.25)
    _run(whole)
    killed = _loop(tmp_path / "b", world, "noise", _KillAfter(world, limit=2, only="base-002"),
                   iterations=4, reeval_share=0.25)
    with pytest.raises(_Killed):  # dies while gathering evidence on the deferred change
        _run(killed)
    run = killed.run.root
    finished = {p.parent for p in run.glob("iterations/003/reeval/*/base-002*/trial-*/result.json")}
    assert len(finished) == 2 and not (run / "iterations" / "003" / "attribution.json").exists()
    rec = _Recording(world)
    _run(_loop(tmp_path / "b", world, "noise", rec, iterations=4, reeval_share=0.25), resume=True)
    assert not finished & set(rec.ran)
    assert _history(run) == _history(whole.run.root)
    strip = lambda r: [{k: x for k, x in v.items() if k != "commit"}  # noqa: E731  (commits differ between repos)
                       for v in json.loads((r / "iterations" / "003" / "attribution.json").read_text())["rejudged"]]
    assert strip(run) == strip(whole.run.root)


def _pending(rounds: int) -> tuple[Pending, SimpleNamespace, Ledger]:
    """A change deferred `rounds` times, watched on task t: 3/8 with it, 1/8 without (not decisive)."""
    v = ChangeVerdict(change_id="chg-1", commit="abc", component="skill", verdict="deferred", reason="", predicted_fixes=["t"],
                      fixes_improved=[], fixes_not_improved=["t"], predicted_regressions=[], regressions_happened=[],
                      unpredicted_regressions=[], deferred_rounds=rounds, watch_tasks=["t"])
    led = Ledger(judged={"001/chg-1"}, touched={"001/chg-1": {"t"}})
    led.add("t", frozenset({"001/chg-1"}), 3, 8)
    led.add("t", frozenset(), 1, 8)
    rd = SimpleNamespace(before=frozenset({"001/chg-1"}), btag="base-003", ev=None, prior=Prior(0.5, 0.5), rp=Replay())
    return Pending("001/chg-1", v, frozenset(), frozenset({"001/chg-1", "x"}), 2, 1), rd, led


@pytest.mark.parametrize("rounds, final, verdict, why", [
    (1, False, "deferred", "deferred again"),
    (MAX_DEFER, False, "rollback", f"deferred {MAX_DEFER} times, the most allowed"),
    (1, True, "rollback", "the final evaluation"),
])
def test_an_undecided_deferred_change_is_deferred_again_or_rolled_back_at_max_age(rounds, final, verdict, why) -> None:
    p, rd, led = _pending(rounds)
    v = rejudge(rd, p, led, np.random.default_rng(0), final=final, decisive=0.99, keep_at=0.9)
    assert v.verdict == verdict and why in v.reason and v.change_iteration == 1
    assert v.watch_evidence[0].with_change == (3, 8) and v.watch_evidence[0].without == (1, 8)
    assert v.deferred_rounds == (rounds + 1 if verdict == "deferred" else rounds)
    assert 0 <= (v.confidence or 0) <= 1


def test_a_deferred_change_whose_task_fell_is_rolled_back_and_one_that_rose_is_kept() -> None:
    p, rd, led = _pending(1)
    led.add("t", frozenset({"001/chg-1"}), 0, 12)  # with it: 3/20; without: 13/20
    led.add("t", frozenset(), 12, 12)
    down = rejudge(rd, p, led, np.random.default_rng(0), final=False, decisive=0.99, keep_at=0.9)
    assert down.verdict == "rollback" and "moved down t" in down.reason
    p, rd, led = _pending(1)
    led.add("t", frozenset({"001/chg-1"}), 12, 12)  # with it: 15/20; without: 1/8
    up = rejudge(rd, p, led, np.random.default_rng(0), final=False, decisive=0.99, keep_at=0.9)
    assert up.verdict == "keep" and up.touched_tasks == ["t"] and up.fixes_improved == ["t"]
