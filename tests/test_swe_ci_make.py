"""`ahe tasks make swe-ci` as a new user runs it: a small repository with a real history in,
task folders out that pass `ahe tasks check` (oracle reward 1, do-nothing reward 0)."""

from __future__ import annotations

import filecmp
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "swe-ci"

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def ahe(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ahe.cli", *args], capture_output=True, text=True, timeout=180, cwd=cwd)


@pytest.fixture
def repos(tmp_path) -> dict[str, list[str]]:
    sys.path.insert(0, str(EXAMPLES))
    from make_examples import build_repo

    return {name: build_repo(name, tmp_path / "repos" / name) for name in ("textstats", "intervals")}


def test_make_then_check(tmp_path, repos):
    shas = repos["textstats"]
    made = ahe("tasks", "make", "swe-ci", "--repo", str(tmp_path / "repos" / "textstats"), "--base", shas[0][:10],
               "--target", "main", "--out", str(tmp_path / "tasks"), "--json")
    assert made.returncode == 0, made.stderr
    [row] = json.loads(made.stdout)
    assert (row["n_base"], row["n_target"], row["gap"], row["kept"]) == (2, 8, 6, True)
    task = Path(row["path"])
    expected = json.loads((task / "tests" / "expected.json").read_text())
    assert expected["n_base"] == 2 and len(expected["target_tests"]) == 8
    # the agent starts from the base code with the target's tests visible; no history to peek at
    assert "def line_count" not in (task / "environment" / "textstats.py").read_text()
    assert "test_sentence_count" in (task / "environment" / "tests" / "test_textstats.py").read_text()
    assert not (task / "environment" / ".git").exists()
    assert "[ci]" not in (task / "task.toml").read_text()  # one-shot unless --rounds

    checked = ahe("tasks", "check", str(tmp_path / "tasks"), "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    [t] = json.loads(checked.stdout)["tasks"]
    assert t["oracle"]["status"] == "ok" and t["oracle"]["reward"] == 1.0
    assert t["nop"]["status"] == "ok" and t["nop"]["reward"] <= 0.0


def test_batch_csv_keeps_tasks_over_the_gap_threshold(tmp_path, repos):
    csv_file = tmp_path / "tasks.csv"
    csv_file.write_text("repo,base,target,name\n"
                        f"repos/textstats,{repos['textstats'][0]},{repos['textstats'][-1]},ts\n"
                        f"repos/intervals,{repos['intervals'][1]},{repos['intervals'][-1]},iv\n")
    made = ahe("tasks", "make", "swe-ci", "--csv", str(csv_file), "--out", str(tmp_path / "tasks"), "--min-gap", "6",
               "--rounds", "4", "--gamma", "1.5", "--json")
    assert made.returncode == 0, made.stderr
    rows = {r["name"]: r for r in json.loads(made.stdout)}
    assert rows["ts"]["kept"] and rows["ts"]["gap"] == 6
    assert not rows["iv"]["kept"] and rows["iv"]["reason"] == "test gap 5 < 6"
    assert sorted(p.name for p in (tmp_path / "tasks").iterdir()) == ["ts"]
    toml = (tmp_path / "tasks" / "ts" / "task.toml").read_text()
    assert "[ci]\nrounds = 4\ngamma = 1.5" in toml


def test_bad_input_is_one_sentence(tmp_path, repos):
    bad = ahe("tasks", "make", "swe-ci", "--repo", str(tmp_path / "repos" / "textstats"), "--base", "nope",
              "--target", "main", "--out", str(tmp_path / "tasks"))
    assert bad.returncode == 2
    assert "no commit 'nope'" in " ".join(bad.stderr.split()) and "Traceback" not in bad.stderr
    notrepo = ahe("tasks", "make", "swe-ci", "--repo", str(tmp_path), "--base", "a", "--target", "b", "--out", str(tmp_path / "t"))
    assert notrepo.returncode == 2 and "not a git repository" in " ".join(notrepo.stderr.split())


def test_the_bundled_examples_are_what_make_examples_writes(tmp_path):
    proc = subprocess.run([sys.executable, str(EXAMPLES / "make_examples.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    for name in ("textstats", "intervals", "units", "mock-policy.yaml"):
        if name.endswith(".yaml"):
            assert (tmp_path / name).read_text() == (EXAMPLES / name).read_text()
            continue
        cmp = filecmp.dircmp(tmp_path / name, EXAMPLES / name, ignore=["__pycache__"])
        stack, diffs = [cmp], []
        while stack:
            c = stack.pop()
            diffs += c.left_only + c.right_only + c.diff_files
            stack += c.subdirs.values()
        assert not diffs, f"{name}: regenerate with examples/swe-ci/make_examples.py ({diffs})"


def test_tasks_swe_ci_source_in_eval(tmp_path, repos):
    """`--tasks swe-ci:CSV`: the source makes the task under the run, once, and eval grades it."""
    csv_file = tmp_path / "pairs.csv"
    csv_file.write_text(f"repo,base,target,name\nrepos/textstats,{repos['textstats'][0]},main,ts\n")
    cmd = ["eval", "--workspace", str(ROOT / "harness_workspace"), "--tasks", f"swe-ci:{csv_file}",
           "--mock-policy", str(EXAMPLES / "mock-policy.yaml"), "--out", str(tmp_path / "run"), "--json"]
    first = ahe(*cmd)
    assert first.returncode == 0, first.stderr
    made = tmp_path / "run" / "tasks-source" / "swe-ci" / "ts" / "tests" / "expected.json"
    stamp = made.stat().st_mtime_ns
    res = json.loads(first.stdout)
    # one-shot task, and the mock does nothing outside a CI round: a(c) = 0, no regression
    assert res["tasks"]["ts"]["reward_means"]["normalized_change"] == 0.0
    assert res["tasks"]["ts"]["reward_means"]["zero_regression"] == 1.0
    again = ahe(*cmd)
    assert again.returncode == 0, again.stderr
    assert made.stat().st_mtime_ns == stamp  # not made again on resume
