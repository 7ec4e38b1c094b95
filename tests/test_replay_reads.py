"""What the noise policies' replay reads every round, made cheap without changing what it reads:
`read_unchanged` (an unchanged file parsed once) and `Ledger.pooled` (which trials are evidence)."""

from __future__ import annotations

import itertools
import os
import random
import time
from pathlib import Path

from ahe.evolution.evidence import Counts, Ledger
from ahe.rollout.models import RunResults
from ahe.run_folder import read_model, read_unchanged


def _results(path: Path, passed: int) -> None:
    path.write_text(RunResults(k=2, tasks={}, n_trials=2, n_passed=passed, pass_at_1=passed / 2, pass_at_k=0.0,
                               infra_errors=0, timeouts=0, verifier_errors=0).model_dump_json())


def test_read_unchanged_parses_an_unchanged_file_once_and_sees_every_rewrite(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    _results(path, 1)
    assert read_unchanged(path, RunResults) is not read_unchanged(path, RunResults)  # just written: parsed each time
    old = time.time() - 10
    os.utime(path, (old, old))
    first = read_unchanged(path, RunResults)
    assert read_unchanged(path, RunResults) is first and first == read_model(path, RunResults)
    _results(path, 2)  # rewritten: same size, a new modification time
    assert read_unchanged(path, RunResults).n_passed == 2
    path.unlink()
    assert read_unchanged(path, RunResults) is None
    path.write_text("{not json")
    assert read_unchanged(path, RunResults) is None


def test_pooled_counts_exactly_the_trials_every_differing_change_leaves_alone() -> None:
    """`pooled` against its definition (`compatible`), on random ledgers."""
    rng = random.Random(3)
    changes = [f"00{i}/chg-1" for i in range(6)]
    for _ in range(200):
        led = Ledger(judged=set(rng.sample(changes, rng.randint(0, 6))),
                     touched={c: set(rng.sample(["a", "b", "c"], rng.randint(0, 2))) for c in rng.sample(changes, 3)})
        states = [frozenset(s) for n in range(4) for s in itertools.combinations(changes[:4], n)]
        for task in "abc":
            for st in rng.sample(states, 6):
                led.add(task, st, rng.randint(0, 2), 2)
        for task, state in itertools.product("abcd", states):
            want = Counts()
            for st, c in led.obs.get(task, {}).items():
                if st == state or led.compatible(task, st, state):
                    want = want + c
            assert led.pooled(task, state) == want
