"""Ctrl-C of `ahe eval` (the real CLI as a subprocess, against the scripted mock over HTTP): it
says that the run stopped, how many trials finished, and the exact command that resumes it —
and that command, run as printed, finishes the run without running a finished trial again."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ahe.demo import TASKS, X, Y, Z, agent_policy
from tests.conftest import SEED

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

STOPPED = re.compile(r"^stopped: (\d+) of 6 trials finished \(results so far: (.+)\); resume with: (ahe eval .+)$", re.M)


def start(tmp_path: Path, latency: float) -> tuple[subprocess.Popen, Path]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({**agent_policy(), "latency_sec": latency}))
    out = tmp_path / "out[ray]"  # brackets a markup parser would eat: the sentence and the command keep them
    argv = [sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(SEED), "--tasks", str(TASKS), "-k", "2",
            "--task", X, "--task", Y, "--task", Z, "-c", "2", "--mock-policy", str(policy), "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.time() + 120
    while time.time() < deadline and not list(out.glob("rollouts/*/*/result.json")) and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    return proc, out


def resume(command: str, cwd: Path) -> subprocess.CompletedProcess:
    argv = shlex.split(command)
    assert argv[0] == "ahe"
    return subprocess.run([sys.executable, "-m", "ahe.cli", *argv[1:]], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_ctrl_c_lets_running_trials_finish_says_so_and_the_shown_command_resumes(tmp_path):
    proc, out = start(tmp_path, latency=0.7)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "stopping: running trials finish, no new one starts (Ctrl-C again to stop now)" in err
    found = STOPPED.search(err)
    assert found, err
    assert "Traceback" not in err and "never retrieved" not in err
    summaries = [line for line in err.splitlines() if line.startswith("trials ")]
    assert len(summaries) < 2 or summaries[-1] != summaries[-2], err  # the last state once, not twice
    finished = {p: p.read_text() for p in out.glob("rollouts/*/*/result.json")}
    assert int(found[1]) == len(finished) and 1 <= len(finished) < 6  # the running ones finished; queued ones never started
    assert Path(found[2]) == out / "results.json"
    assert json.loads((out / "results.json").read_text())["missing_trials"] == 6 - len(finished)

    done = resume(found[3], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    assert res["n_trials"] == 6 and res["missing_trials"] == 0 and res["pass_at_1"] == pytest.approx(2 / 6)
    for path, text in finished.items():  # nothing finished ran again
        assert path.read_text() == text


def test_ctrl_c_twice_stops_at_once_and_the_cut_trials_run_on_resume(tmp_path):
    proc, out = start(tmp_path, latency=3.0)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and time.monotonic() - t0 < 20, err  # not after the 3 s turns of the running trials
    found = STOPPED.search(err)
    assert found and "Traceback" not in err, err
    finished = list(out.glob("rollouts/*/*/result.json"))
    assert int(found[1]) == len(finished) < 6

    done = resume(found[3], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((out / "results.json").read_text())["n_trials"] == 6
