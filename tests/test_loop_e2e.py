"""The evolution loop end to end: the design's scenario, kill-and-resume in every phase, Ctrl-C.

Every model is the scripted mock over real HTTP; trials run in real bwrap; the harness is a
real git repository. The scenario is `ahe demo`'s (see ahe/demo.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import git
import pytest

from ahe.demo import X, Y, Z, write_demo
from tests.shared_runs import line_demo

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def evolve(*args: str, env_extra: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "ahe.cli", "evolve", *args, "-q"], capture_output=True, text=True,
                          timeout=timeout, env=env)


def outcome(run: Path) -> dict:
    """What must be identical between an uninterrupted run and a killed-and-resumed one."""
    scores = json.loads((run / "scores.json").read_text())
    repo = git.Repo(run / "workspace")
    return {
        "pass_at_1": [(s["iteration"], s["pass_at_1"]) for s in scores["iterations"]],
        "kept": [(s["iteration"], s["kept"], s["rolled_back"]) for s in scores["iterations"]],
        "best_iteration": scores["best_iteration"],
        "head_tree": repo.head.commit.tree.hexsha,
        "best_tree": repo.commit("best").tree.hexsha,
        "tags": sorted(t.name for t in repo.tags),
        "n_commits": len(list(repo.iter_commits())),
        # commit ids differ between two runs (timestamps); everything else must not
        "attribution_002": [{k: v for k, v in c.items() if k != "commit"}
                            for c in json.loads((run / "iterations" / "002" / "attribution.json").read_text())["changes"]],
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, dict]:
    """The demo run never killed (built once a session, tests/shared_runs.py; read only)."""
    run = line_demo(tmp_path_factory)
    return run, outcome(run)


def test_design_scenario(reference):
    run, out = reference
    att = json.loads((run / "iterations" / "002" / "attribution.json").read_text())
    v = {c["change_id"]: c for c in att["changes"]}
    assert v["chg-1"]["verdict"] == "keep" and v["chg-1"]["fixes_improved"] == [X]
    assert v["chg-2"]["verdict"] == "rollback"
    assert v["chg-2"]["reason"] == f"predicted fix did not improve; regression of {Y} foreseen by replay"
    assert v["chg-2"]["replay_at_risk"] == [Y] and v["chg-2"]["unpredicted_regressions"] == []
    assert att["improved"] == [X] and att["regressed"] == [Y]
    fp, rp = att["fix_predictions"], att["regression_predictions"]
    assert (fp["precision"], fp["recall"]) == (0.5, 1.0) and fp["predicted"] == sorted([X, Z])
    assert fp["random_precision"] == pytest.approx(1 / 3) and fp["random_recall"] == pytest.approx(2 / 3)
    assert (rp["precision"], rp["recall"]) == (None, 0.0)  # the agent foresaw no regression ...
    union = att["union_regression_predictions"]
    assert (union["precision"], union["recall"]) == (1.0, 1.0)  # ... the replay did
    assert att["unpredicted_regressions"] == [Y] and att["pinned_by_replay"] == {Y: ["chg-2"]}

    # pass@1 rises: the seed solves Y only; iteration 3 evaluates lesson-without-middleware
    assert out["pass_at_1"] == [(1, pytest.approx(1 / 3)), (2, pytest.approx(1 / 3)), (3, pytest.approx(2 / 3)), (4, pytest.approx(2 / 3))]
    rb = json.loads((run / "iterations" / "002" / "rollback.json").read_text())["rolled_back"]
    assert [(r["change_id"], r["method"]) for r in rb] == [("chg-2", "git revert")]

    repo = git.Repo(run / "workspace")
    assert repo.commit("best") == repo.commit("iter-002")  # the first harness that scored 2/3
    assert out["best_iteration"] == 3
    ws = run / "workspace"
    assert "byte for byte" in (ws / "LongTermMEMORY.md").read_text()
    assert not (ws / "middleware" / "strict_mode.py").exists() and "strict_mode" not in (ws / "agent.yaml").read_text()
    assert "rollback chg-2" in repo.commit("iter-002").message

    manifest = json.loads((run / "iterations" / "001" / "evolve" / "manifest.json").read_text())
    assert [(c["id"], c["status"], c["component"]) for c in manifest["changes"]] == [
        ("chg-1", "accepted", "long_term_memory"), ("chg-2", "accepted", "middleware")]
    assert repo.commit(manifest["changes"][1]["commit"]).parents[0].hexsha == manifest["changes"][0]["commit"]
    history = (run / "history.md").read_text()
    assert "rolled back chg-2" in history and "loop ended: finished all iterations" in history
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    assert {"phase_start", "phase_end", "decision", "rollback", "loop_end"} <= {e["type"] for e in events}
    for it in ("001", "002", "003"):
        assert (run / "iterations" / it / "analysis" / "overview.md").is_file()
    assert json.loads((run / "scores.json").read_text())["totals"]["tokens"]["evolve"] > 0


@pytest.mark.parametrize("kill_at", ["002/rollout+0.4", "002/attribution", "002/rollback", "001/debug+0.3", "001/evolve+0.6", "003/evolve"])
def test_killed_in_any_phase_resumes_to_the_same_result(reference, tmp_path, kill_at):
    _, expected = reference
    cfg = write_demo(tmp_path)
    run = tmp_path / "run"
    killed = evolve(str(cfg), "--run-dir", str(run), env_extra={"AHE_KILL_AT": kill_at})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    finished = {p: p.read_text() for p in run.glob("iterations/*/rollouts/*/*/result.json")}
    resumed = evolve("--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr
    assert outcome(run) == expected
    for path, text in finished.items():  # no finished trial was run again
        assert path.read_text() == text


def test_ctrl_c_stops_after_running_trials_and_resumes(reference, tmp_path):
    _, expected = reference
    cfg = write_demo(tmp_path)
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "ahe.cli", "evolve", str(cfg), "--run-dir", str(run), "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list(run.glob("iterations/002/rollouts/*/*/result.json")):
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "resume with" in err
    state = json.loads((run / "loop_state.json").read_text())
    assert not state["finished"]
    resumed = evolve("--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr
    assert outcome(run) == expected
