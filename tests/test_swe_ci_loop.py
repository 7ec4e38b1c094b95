"""The CI loop end to end on the bundled SWE-CI examples (mock Architect and Programmer over
real HTTP, real bwrap): the known per-round values, and a kill in the middle of a round."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "swe-ci"
SEED = ROOT / "harness_workspace"

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def _eval(tasks: Path, out: Path, policy: Path, k: int = 1) -> list[str]:
    return [sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(SEED), "--tasks", str(tasks), "-k", str(k),
            "--mock-policy", str(policy), "--out", str(out), "--isolation", "bwrap", "--json"]


def test_eval_k2_on_the_examples_gives_the_known_values(tmp_path):
    proc = subprocess.run(_eval(EXAMPLES, tmp_path / "out", EXAMPLES / "mock-policy.yaml", k=2),
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    known = {  # from examples/swe-ci/README.md: a(c_i) per round, EvoScore at gamma 1 and 2
        "textstats": ([1 / 3, 1.0], 7 / 9, (2 / 3 + 4 + 8) / 14, 0.0),
        "intervals": ([1.0], 1.0, 1.0, 1.0),
        "units": ([0.4, 0.4, 0.8], 1.6 / 3, 8.8 / 14, 0.0),
    }
    for task, (changes, e1, e2, zero) in known.items():
        for trial in (1, 2):
            d = tmp_path / "out" / "rollouts" / task / f"trial-{trial}"
            rounds = [json.loads(line) for line in (d / "verifier" / "rounds.jsonl").read_text().splitlines()]
            assert [r["a"] for r in rounds] == pytest.approx(changes)
            rewards = json.loads((d / "result.json").read_text())["rewards"]
            assert rewards["evoscore_gamma_1"] == pytest.approx(e1)
            assert rewards["evoscore"] == pytest.approx(e2)
            assert rewards["zero_regression"] == zero
            # every round's sessions are in the trial's trace, as sub-agent traces
            for r in rounds:
                for role in ("architect", "programmer"):
                    assert (d / "sub_agents" / f"r{r['round']:02d}-{role}" / "trajectory.json").is_file()
            steps = json.loads((d / "trajectory.json").read_text())["steps"]
            assert len(steps) == 3 * len(rounds)
    assert res["pass_at_1"] == pytest.approx(2 / 3)
    means = res["reward_means"]
    assert means["evoscore_gamma_1"] == pytest.approx((7 / 9 + 1 + 1.6 / 3) / 3)
    assert means["evoscore"] == pytest.approx(((2 / 3 + 12) / 14 + 1 + 8.8 / 14) / 3)
    assert means["zero_regression"] == pytest.approx(1 / 3)
    assert means["solved"] == pytest.approx(2 / 3)
    assert means["normalized_change"] == pytest.approx((1 + 1 + 0.8) / 3)


def _children_of(pid_marker: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if pid_marker in (p / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(p.name))
            except OSError:
                pass
    return pids


def test_a_ci_trial_killed_mid_round_resumes_at_that_round(tmp_path):
    tasks = tmp_path / "tasks"
    shutil.copytree(EXAMPLES / "units", tasks / "units")
    policy = yaml.safe_load((EXAMPLES / "mock-policy.yaml").read_text())
    for rule in policy["rules"]:
        if rule["name"] == "units-round-2":
            rule["latency_sec"] = 120  # round 2's Programmer hangs: the kill lands there
    (tmp_path / "slow.yaml").write_text(yaml.safe_dump(policy))
    out = tmp_path / "out"
    trial = out / "rollouts" / "units" / "trial-1"
    proc = subprocess.Popen(_eval(tasks, out, tmp_path / "slow.yaml"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.time() + 90
        prog2 = trial / "sub_agents" / "r02-programmer" / "trajectory.claimed.json"  # the live trace (the worker's claim)
        while time.time() < deadline and not (prog2.is_file() and '"run_shell_command"' in prog2.read_text()):
            time.sleep(0.1)
        assert prog2.is_file(), "round 2's Programmer never started"
        time.sleep(0.5)  # it is now waiting for the slow reply
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for pid in _children_of(str(tmp_path)):  # a sandbox that outlived the kill
            os.kill(pid, signal.SIGKILL)
    assert not (trial / "result.json").exists()
    first = (trial / "verifier" / "rounds.jsonl").read_text()
    assert len(first.splitlines()) == 1
    arch1 = trial / "sub_agents" / "r01-architect" / "trajectory.json"
    arch1_before = (arch1.read_bytes(), arch1.stat().st_mtime_ns)

    done = subprocess.run(_eval(tasks, out, EXAMPLES / "mock-policy.yaml"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = (trial / "verifier" / "rounds.jsonl").read_text().splitlines()
    assert lines[0] == first.splitlines()[0]  # round 1 was not redone
    assert (arch1.read_bytes(), arch1.stat().st_mtime_ns) == arch1_before
    assert [json.loads(line)["a"] for line in lines] == pytest.approx([0.4, 0.4, 0.8])
    assert json.loads(lines[1])["regressions"] == ["tests.test_units.TestUnits.test_to_feet"]
    rewards = json.loads((trial / "result.json").read_text())["rewards"]
    assert rewards["evoscore"] == pytest.approx(8.8 / 14) and rewards["zero_regression"] == 0.0
    # the resumed round 2 started from round 1's codebase: its Programmer saw the same /app
    assert (trial / "sub_agents" / "r02-programmer" / "trajectory.json").is_file()


def test_the_architect_cannot_change_the_code(tmp_path):
    tasks = tmp_path / "tasks"
    shutil.copytree(EXAMPLES / "intervals", tasks / "intervals")
    policy = yaml.safe_load((EXAMPLES / "mock-policy.yaml").read_text())
    policy["rules"][0:0] = [{"name": "architect-writes", "match": {"system_contains": "You are the Architect", "turn": 1},
                             "tool_calls": [{"name": "run_shell_command", "arguments": {
                                 "command": "echo 'def merge(items): return []' > /app/intervals.py; touch /app/ARCHITECT_WAS_HERE"}}]}]
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(policy))
    done = subprocess.run(_eval(tasks, tmp_path / "out", tmp_path / "p.yaml"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    trial = tmp_path / "out" / "rollouts" / "intervals" / "trial-1"
    ls = json.loads((trial / "sub_agents" / "r01-programmer" / "trajectory.json").read_text())["steps"]
    listing = next(s["observation"]["results"][0]["content"] for s in ls if s.get("observation"))
    assert "intervals.py" in listing and "ARCHITECT_WAS_HERE" not in listing
    assert json.loads((trial / "result.json").read_text())["rewards"]["reward"] == 1.0
