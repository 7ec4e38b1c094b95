"""Gains that hold outside the search (issue 36 item 6): a sealed held-out split.

End to end: `ahe evolve` (a real subprocess, the scripted mock models over HTTP, trials in real
bwrap) on the demo's three tasks with `holdout: {}` — one held out, two searched on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from ahe.config import ExperimentConfig, HoldoutSettings
from ahe.errors import AheError
from ahe.evolution.forecast import count_trials, phase_plan
from ahe.evolution.holdout import choose_held_out, paired_ci

bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def ahe(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ahe.cli", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "250"})


def demo_config(d: Path, holdout: str = "holdout: {}") -> Path:
    from ahe.demo import write_demo

    cfg = write_demo(d)
    cfg.write_text(cfg.read_text() + holdout + "\n")
    return cfg


# ---------------------------------------------------------------------------- the split itself
def test_split_is_stable_and_by_hash_not_order():
    names = [f"t{i:02d}" for i in range(10)]
    held, how = choose_held_out(names, HoldoutSettings(share=0.2))
    assert len(held) == 2 and how == "share 0.2 (seed ahe-holdout)"
    assert choose_held_out(list(reversed(names)), HoldoutSettings(share=0.2))[0] == held
    assert any(choose_held_out(names, HoldoutSettings(share=0.2, seed=f"s{i}"))[0] != held for i in range(5))
    assert choose_held_out(names, HoldoutSettings(tasks=["t03"]))[0] == ["t03"]


@pytest.mark.parametrize("n, settings, held, search", [
    (2, HoldoutSettings(share=0.2), 0, 2),  # rounds to no held-out task
    (3, HoldoutSettings(share=0.5), 2, 1),  # leaves one search task
    (3, HoldoutSettings(tasks=["t00", "t01"]), 2, 1),
])
def test_a_split_too_small_is_one_sentence(n, settings, held, search):
    with pytest.raises(AheError) as e:
        choose_held_out([f"t{i:02d}" for i in range(n)], settings)
    msg = str(e.value)
    assert msg.startswith("holdout:") and f"leaves {held} held out and {search} to search on" in msg
    assert "\n" not in msg and "holdout.share" in msg


def test_an_unknown_held_out_task_is_named():
    with pytest.raises(AheError, match=r"holdout.tasks: nope is not a task of this run"):
        choose_held_out(["a", "b", "c"], HoldoutSettings(tasks=["nope"]))


def test_paired_interval_brackets_the_mean():
    lo, hi = paired_ci([0.0, 100.0, 0.0, 100.0])
    assert lo is not None and lo < 50.0 < hi and lo >= 0.0 and hi <= 100.0
    assert paired_ci([]) == (None, None)


def test_forecast_counts_the_held_out_trials(tmp_path):
    paper = {"strictness": "paper"}  # no re-evaluation trials, so the counts are exact
    cfg = ExperimentConfig(tasks=tmp_path, iterations=2, k=3, holdout=HoldoutSettings(share=0.2), attribution=paper)
    plain = ExperimentConfig(tasks=tmp_path, iterations=2, k=3, attribution=paper)
    t, p = count_trials(cfg, 10), count_trials(plain, 10)
    assert t.tasks == 8 and t.rollout == 3 * 8 * 3 and t.holdout == 2 * 2 * 3  # seed and best, 2 held-out tasks, k=3
    assert t.total.mid == 72 + 12 and p.total.mid == 3 * 10 * 3 and p.holdout == 0
    assert phase_plan(cfg, 10, None)[-1][:2] == (0, "holdout")
    assert phase_plan(cfg, 10, None)[-1][2]["agent"].mid == 12


@bwrap
def test_a_share_too_small_for_the_set_stops_before_the_run(tmp_path):
    cfg = demo_config(tmp_path, "holdout: {share: 0.1}")  # 0.1 × 3 tasks rounds to none held out
    proc = ahe("evolve", str(cfg), "--run-dir", str(tmp_path / "run"), "-q")
    assert proc.returncode != 0
    assert "holdout: share 0.1 (seed ahe-holdout) of 3 tasks leaves 0 held out and 3 to search on" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()  # nothing was made: the fixed config runs into the same folder


# ---------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("holdout")
    proc = ahe("evolve", str(demo_config(d)), "--run-dir", str(d / "run"), "-q")
    assert proc.returncode == 0, proc.stderr
    return d / "run"


def _files_naming(root: Path, name: str) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and name.encode() in p.read_bytes())


@bwrap
def test_held_out_tasks_never_reach_a_decision(run):
    split = json.loads((run / "holdout" / "split.json").read_text())
    assert len(split["held_out"]) == 1 and len(split["search"]) == 2
    (held,) = split["held_out"]
    # the loop's every phase: rollouts, debugger evidence, evolve prompts/transcripts and manifests, attribution, H_best
    assert (run / "iterations" / "002" / "evolve").is_dir() or (run / "iterations" / "001" / "evolve").is_dir()
    assert _files_naming(run / "iterations", held) == []
    assert sorted(p.name for p in (run / "holdout" / "search-tasks").iterdir()) == split["search"]
    for it in sorted((run / "iterations").iterdir()):
        results = json.loads((it / "results.json").read_text())
        assert sorted(results["tasks"]) == split["search"]
    log = git.Repo(run / "workspace").git.log("-p", "--all")
    assert held not in log


@bwrap
def test_best_and_seed_are_scored_on_the_held_out_split(run):
    split = json.loads((run / "holdout" / "split.json").read_text())
    r = json.loads((run / "holdout" / "result.json").read_text())
    scores = json.loads((run / "scores.json").read_text())
    assert r["held_out"] == split["held_out"] and r["k"] == 2
    assert r["best"]["commit"] == scores["best_commit"] and r["best"]["n_trials"] == 2 and r["seed"]["n_trials"] == 2
    assert r["seed"]["commit"] == git.Repo(run / "workspace").commit("iter-000").hexsha
    assert r["gain_points"] == pytest.approx(100 * (r["best"]["pass_at_1"] - r["seed"]["pass_at_1"]))
    assert r["search_best"] == scores["best_pass_at_1"]
    for label in ("seed", "best"):
        rolled = sorted(p.name for p in (run / "holdout" / label / "rollouts").iterdir())
        assert rolled == split["held_out"]
    history = (run / "history.md").read_text()
    line = next(ln for ln in history.splitlines() if ln.startswith("- held-out check"))
    assert "gain on the search split" in line and "on the sealed held-out split" in line and "number to trust" in line
    bill = json.loads((run / "bill.json").read_text())
    trials = next(c for c in bill["check"] if c["quantity"] == "trials")
    assert trials["actual"] == 4 * 2 * 2 + 2 * 1 * 2  # four rounds of 2 search tasks × k=2, then seed and best held out


@bwrap
def test_audit_and_report_show_both_gains(run):
    proc = ahe("audit", str(run), "--json")
    assert proc.returncode == 0, proc.stderr
    h = json.loads(proc.stdout)["holdout"]
    assert h["gain_points"] is not None and h["search_gain_points"] is not None and "number to trust" in h["words"]
    table = ahe("audit", str(run))
    assert "held-out check" in table.stdout and "number to trust" in table.stdout
    assert ahe("report", str(run)).returncode == 0
    html = (run / "report.html").read_text()
    assert 'data-split="search"' in html and 'data-split="held-out"' in html and "the number to trust" in html


@bwrap
def test_resume_never_scores_the_held_out_split_again(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    trials = sorted((copy / "holdout").glob("*/rollouts/*/trial-*/result.json"))
    stamps = {p: p.stat().st_mtime_ns for p in trials}
    before = (copy / "holdout" / "result.json").read_text()
    proc = ahe("evolve", "--resume", str(copy), "-q")
    assert proc.returncode == 0, proc.stderr
    assert (copy / "holdout" / "result.json").read_text() == before
    assert {p: p.stat().st_mtime_ns for p in trials} == stamps
    assert (copy / "history.md").read_text().count("- held-out check") == 1
    # killed while scoring: the finished trials stay, only the result is made again
    (copy / "holdout" / "result.json").unlink()
    state = json.loads((copy / "loop_state.json").read_text())
    state["done"].pop("000", None)
    state["finished"] = False
    (copy / "loop_state.json").write_text(json.dumps(state))
    proc = ahe("evolve", "--resume", str(copy), "-q")
    assert proc.returncode == 0, proc.stderr
    assert {p: p.stat().st_mtime_ns for p in trials} == stamps
    again = json.loads((copy / "holdout" / "result.json").read_text())
    assert again["gain_points"] == json.loads(before)["gain_points"]


# ---------------------------------------------------------------------------- SWE-Playground's marking
def _task(folder: Path) -> None:
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(f'[task]\nname = "{folder.name}"\n[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 30\n')
    (folder / "instruction.md").write_text("Do it.\n")
    (folder / "tests" / "test.sh").write_text("exit 0\n")


def _playground(root: Path) -> Path:
    for split, names in (("train", ("p1-a", "p1-b", "p3-a")), ("holdout", ("p2-a",))):
        for n in names:
            _task(root / split / n)
    (root / "derive.json").write_text(json.dumps({"projects": ["p1", "p2", "p3"], "holdout": ["p2"]}))
    return root


def test_a_playground_split_is_used_as_it_is(tmp_path):
    from ahe.evolution.holdout import PLAYGROUND, search_folder
    from ahe.run_folder import RunFolder

    root = _playground(tmp_path / "pg")
    run = RunFolder(tmp_path / "run")
    cfg = ExperimentConfig(tasks=root / "train", holdout=HoldoutSettings())
    split, folder = search_folder(cfg, root / "train", run)
    assert split is not None and split.source == PLAYGROUND and folder == root / "train"
    assert split.search == ["p1-a", "p1-b", "p3-a"] and split.held_out == ["p2-a"] and split.tasks_dir == root / "holdout"
    assert (run.sealed / "tasks" / "p2-a").is_dir()  # sealed with the rest at the start
    with pytest.raises(AheError, match="already holds out whole projects"):
        search_folder(cfg.model_copy(update={"holdout": HoldoutSettings(share=0.5)}), root / "train", RunFolder(tmp_path / "r2"))
    with pytest.raises(AheError, match="held-out side of a SWE-Playground split"):
        search_folder(cfg, root / "holdout", RunFolder(tmp_path / "r3"))
