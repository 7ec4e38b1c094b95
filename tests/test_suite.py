"""`ahe simulate --suite`: worlds side by side, development and evaluation seeds apart, the share
of the achievable gain per policy; any registered policy by name (a plugin's too)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ahe.errors import ConfigError
from ahe.simulate.metrics import RunMetrics
from ahe.simulate.suite import SEED_RANGES, captured, load_suite, seed_list

ROOT = Path(__file__).resolve().parents[1]


def test_the_standard_suite_spans_the_ranges_the_issue_names() -> None:
    suite = load_suite("standard")
    w = suite.worlds
    assert len(w) >= 8 and suite.seeds == 20
    counts, ks = [x.tasks.count for x in w], [x.k for x in w]
    assert min(counts) <= 30 and max(counts) >= 150 and min(ks) == 2 and max(ks) >= 4
    p1 = [x.tasks.pass_at_1 for x in w]
    assert min(p1) <= 0.3 and max(p1) >= 0.8
    flaky = [x.tasks.flaky_share for x in w]
    assert min(flaky) <= 0.1 and max(flaky) >= 0.4
    gains = [g for x in w for g in x.changes.effects.gain]
    assert min(gains) <= 0.15 and max(gains) >= 0.8
    harm = [x.changes.effects.weights["harmful"] / sum(x.changes.effects.weights.values()) for x in w]
    assert min(harm) <= 0.1 + 1e-9 and max(harm) >= 0.35 - 1e-9
    per = [n for x in w for n in x.changes.per_iteration]
    assert min(per) == 1 and max(per) >= 5
    its = [x.iterations for x in w]
    assert min(its) <= 3 and max(its) == 12  # the small worlds (issue 35): a demo's three iterations
    small = [x for x in w if x.tasks.count <= 10]  # the demo's and a mini config's shape: deterministic, one change a flip
    assert small and all(x.tasks.flaky_share == 0 and x.changes.effects.beneficial_tasks == (1, 1) for x in small)
    precision = [x.manifests.fix_precision for x in w]
    assert min(precision) < 0.05 and max(precision) >= 0.6  # near-random to good


def test_development_and_evaluation_seeds_never_overlap() -> None:
    dev, ev = set(seed_list("dev", 1000)), set(seed_list("eval", 1000))
    assert not dev & ev and min(ev) == SEED_RANGES["eval"]
    with pytest.raises(ConfigError, match="--seed-range test: use dev"):
        seed_list("test", 3)


def test_the_share_of_the_achievable_gain_is_pooled_over_seeds() -> None:
    def m(seed: int, best: float, oracle: float) -> RunMetrics:
        return RunMetrics(seed=seed, policy="p", real_changes=1, real_correct=1, neutral_changes=0, neutral_kept=0,
                          best_true=best, final_true=best, oracle_true=oracle, seed_true=0.5, rollouts=10, reeval_trials=0)
    share, lo, hi = captured([m(0, 0.6, 0.7), m(1, 0.5, 0.6)], "best_true")
    assert share == pytest.approx(0.1 / 0.3) and lo <= share <= hi


def test_an_unknown_suite_is_one_sentence() -> None:
    with pytest.raises(ConfigError, match="--suite nowhere: no such suite; use one of: holdout, standard"):
        load_suite("nowhere")


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ahe.cli", "simulate", *args], capture_output=True, text=True, timeout=600,
                          env=env, cwd=ROOT)


def test_a_suite_writes_its_table_for_any_registered_policy(tmp_path: Path) -> None:
    folder = tmp_path / "mini"
    folder.mkdir()
    for name, count in (("a", 10), ("b", 12)):
        (folder / f"{name}.yaml").write_text(f"name: {name}\niterations: 2\ntasks:\n  count: {count}\n")
    (folder / "suite.yaml").write_text("policies: [paper, lenient, expected-value]\nseeds: 2\n")
    out = tmp_path / "out"
    p = _cli("--suite", str(folder), "--seed-range", "dev", "--jobs", "1", "--out", str(out))
    assert p.returncode == 0, p.stderr
    data = json.loads((out / "suite.json").read_text())
    assert data["seeds"] == [0, 1] and data["policies"] == ["paper", "lenient", "expected-value"]
    assert {(r["world"], r["policy"]) for r in data["rows"]} == {(w, p) for w in "ab" for p in data["policies"]}
    assert [s["policy"] for s in data["summary"]] == data["policies"]
    md = (out / "suite.md").read_text()
    assert "H_best captures" in md and "| a | lenient |" in md and "worst world" in md


def test_an_unknown_policy_is_one_sentence_not_a_traceback(tmp_path: Path) -> None:
    sc = tmp_path / "s.yaml"
    sc.write_text("seeds: 1\niterations: 1\ntasks:\n  count: 6\npolicies: [paper, no-such-policy]\n")
    p = _cli("--scenario", str(sc), "--out", str(tmp_path / "o"), "--jobs", "1")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "no-such-policy" in p.stderr and "use one of" in p.stderr and "expected-value" in p.stderr


def test_a_plugin_policy_is_simulated_by_name(tmp_path: Path) -> None:
    (tmp_path / "my_policy_plugin.py").write_text(
        "from ahe.evolution.policies import KEEP_EVERYTHING\n"
        "from ahe.evolution.registry import register_policy\n\n\n"
        "class Mine:\n    name = 'mine'\n\n    def judge(self, change, evidence):\n"
        "        return KEEP_EVERYTHING.judge(change, evidence)\n\n\nregister_policy(Mine())\n")
    sc = tmp_path / "s.yaml"
    sc.write_text("seeds: 1\niterations: 2\ntasks:\n  count: 8\npolicies: [mine]\n")
    env = {**os.environ, "AHE_PLUGINS": "my_policy_plugin",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    p = _cli("--scenario", str(sc), "--out", str(tmp_path / "o"), "--jobs", "1", env=env)
    assert p.returncode == 0, p.stderr
    assert [r["policy"] for r in json.loads((tmp_path / "o" / "table.json").read_text())["rows"]] == ["mine"]


def test_the_holdout_suite_loads_and_differs_from_the_standard_one() -> None:
    """The worlds written after the default policy was frozen (docs/decisions.md): none of them is a
    standard world under another name."""
    holdout, standard = load_suite("holdout"), load_suite("standard")
    assert len(holdout.worlds) == 5
    dump = lambda w: w.model_dump(exclude={"name", "description"})  # noqa: E731
    assert not [w.name for w in holdout.worlds if any(dump(w) == dump(s) for s in standard.worlds)]
