"""The Ray executor on a real local cluster: the same run folder as the local executor, keys never
on disk, a worker node killed mid-run, the driver killed mid-rollout and resumed.

The cluster is separate `ray start` processes (a head and worker nodes with their own small
resources and ports); trials of bundled tasks run in real bwrap on every node; every model is
the scripted mock over real HTTP.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ahe.demo import TASKS, X, Y, Z, agent_policy
from ahe.llm.types import RoleConfig
from ahe.rollout.scheduler import RolloutConfig, run_rollouts
from tests.conftest import SEED
from tests.ray_support import ray_cluster, ray_demo, require_ray  # noqa: F401  (fixture)

pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.timeout(600)]

PLANTED = "sk-ahe-planted-7f3c2a9e41d0"  # a fake API key that must never reach a disk
TIMING = ("duration_sec", "agent_duration_sec", "verifier_duration_sec", "started_at")
FOUR = [X, Y, Z, "csv-region-totals"]


def cfg(url: str, **kw) -> RolloutConfig:
    role = RoleConfig(model="mock", base_url=url, max_attempts=2, backoff_initial_sec=0.01, backoff_max_sec=0.02, timeout_sec=30)
    return RolloutConfig(tasks_dir=TASKS, workspace=SEED, agent_role=role, concurrency=4, isolation="bwrap", **kw)


def trial_contents(out: Path) -> dict:
    """Every file of every trial folder; result.json without its timings (those differ run to run)."""
    seen = {}
    for p in sorted((out / "rollouts").rglob("*")):
        if p.is_file():
            rel = str(p.relative_to(out))
            seen[rel] = {k: v for k, v in json.loads(p.read_text()).items() if k not in TIMING} if p.name == "result.json" else None
    return seen


def summary(out: Path) -> dict:
    r = json.loads((out / "results.json").read_text())
    return {"pass_at_1": r["pass_at_1"], "n_passed": r["n_passed"], "infra": r["infra_errors"], "missing": r["missing_trials"],
            "tasks": {t: (v["rewards"], v["passed"]) for t, v in r["tasks"].items()}}


def grep_tree(root: Path, needle: bytes) -> list[str]:
    hits = []
    for p in root.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink() and needle in p.read_bytes():
                hits.append(str(p))
        except OSError:
            pass
    return hits


def test_same_run_folder_as_local_and_no_key_on_disk(ray_cluster, mock_llm, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    mock = mock_llm(agent_policy())
    local, remote = tmp_path / "local", tmp_path / "ray"
    asyncio.run(run_rollouts(cfg(mock.url, include=FOUR, k=2), local))
    nodes: dict[str, int] = {}

    def on_event(kind, spec, res, node=None, **_):
        if kind == "start":
            nodes[node] = nodes.get(node, 0) + 1

    asyncio.run(run_rollouts(cfg(mock.url, include=FOUR, k=2, executor="ray", ray_address=ray_cluster.address), remote, on_event=on_event))

    assert summary(remote) == summary(local)
    assert summary(local)["pass_at_1"] == pytest.approx(2 / 8)  # the seed solves only Y
    assert trial_contents(remote) == trial_contents(local)  # same files, same results
    assert len(nodes) == 2 and sum(nodes.values()) == 8, nodes  # trials ran on both nodes
    assert mock.server.api_keys == {PLANTED}  # the key did reach the endpoint from the workers …
    needle = PLANTED.encode()
    assert grep_tree(remote, needle) == []  # … and is in no file of the run folder,
    assert grep_tree(ray_cluster.temp_dir, needle) == []  # nor in Ray's session logs or saved runtime envs
    assert list(ray_cluster.temp_dir.glob("session_*/logs/*")), "the cluster wrote no logs to check"

    doctor = subprocess.run([sys.executable, "-m", "ahe.cli", "doctor", "--json", "--ray-address", ray_cluster.address],
                            capture_output=True, text=True, timeout=120)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["ray cluster"]["ok"] and "2 alive node(s)" in checks["ray cluster"]["detail"], checks["ray cluster"]


def test_worker_node_killed_mid_run_is_retried_and_nothing_finished_reruns(ray_cluster, mock_llm, tmp_path):
    before = {n["id"] for n in ray_cluster.status()}
    ray_cluster.add_node("victim", cpus=2)
    victim = next(n["id"] for n in ray_cluster.status() if n["id"] not in before)
    mock = mock_llm({**agent_policy(), "latency_sec": 1.0})
    killed: list[str] = []

    def on_event(kind, spec, res, node=None, **_):
        if kind == "start" and node and node.endswith("/" + victim[:6]) and not killed:
            killed.append(f"{spec.task_name}/{spec.trial}")
            ray_cluster.kill_node("victim")

    out = tmp_path / "out"
    res = asyncio.run(run_rollouts(cfg(mock.url, include=[X, Y, Z], k=2, retry_infra=1, executor="ray",
                                       ray_address=ray_cluster.address), out, on_event=on_event))
    assert killed, "no trial was placed on the victim node"
    assert res.infra_errors == 0 and res.missing_trials == 0
    assert res.pass_at_1 == pytest.approx(2 / 6)
    ends = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    ends = [e for e in ends if e["type"] == "trial_end"]
    lost = [e for e in ends if e["error_class"] == "infra"]
    assert lost and all(e["attempt"] == 1 for e in lost)  # the victim's trials came back as infra …
    finished = [(e["task"], e["trial"]) for e in ends if e["error_class"] != "infra"]
    assert sorted(finished) == sorted({(t, n) for t in (X, Y, Z) for n in (1, 2)})  # … each trial finished once
    retried = {(e["task"], e["trial"]) for e in lost}
    for t, n in retried:
        result = json.loads((out / "rollouts" / t / f"trial-{n}" / "result.json").read_text())
        assert result["attempt"] == 2 and result["error_class"] is None


def test_driver_killed_mid_rollout_resumes_without_rerunning_finished_trials(ray_cluster, tmp_path):
    config = ray_demo(tmp_path / "exp", ray_cluster.address)
    run = tmp_path / "run"
    env = {**os.environ, "RAY_ADDRESS": ""}
    proc = subprocess.Popen([sys.executable, "-m", "ahe.cli", "evolve", str(config), "--run-dir", str(run), "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    rollouts = run / "iterations" / "001" / "rollouts"
    deadline = time.time() + 180
    while time.time() < deadline and len(list(rollouts.glob("*/*/result.json"))) < 2 and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    finished = {p: p.read_text() for p in rollouts.glob("*/*/result.json")}
    assert 2 <= len(finished) < 6, "the driver was not killed mid-rollout"

    resumed = subprocess.run([sys.executable, "-m", "ahe.cli", "evolve", "--resume", str(run), "-q"],
                             capture_output=True, text=True, timeout=400, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for path, text in finished.items():  # no finished trial was run again
        assert path.read_text() == text
    scores = json.loads((run / "scores.json").read_text())
    assert [(s["iteration"], s["pass_at_1"]) for s in scores["iterations"]] == [(1, pytest.approx(1 / 3)), (2, pytest.approx(1 / 3))]
    assert all(s["infra_errors"] == 0 for s in scores["iterations"])
    att = json.loads((run / "iterations" / "002" / "attribution.json").read_text())
    assert {c["change_id"]: c["verdict"] for c in att["changes"]} == {"chg-1": "keep", "chg-2": "rollback"}


def test_ahe_eval_cli_on_ray_ctrl_c_cancels_then_resumes(ray_cluster, tmp_path):
    """A new user's path: `ahe eval --executor ray --ray-address ...`; Ctrl-C twice stops it at once
    (running trials cancelled on their nodes) with one sentence and no leftover-future noise; the
    command it shows resumes it, and nothing finished is run again."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({**agent_policy(), "latency_sec": 0.7}))
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(SEED), "--tasks", str(TASKS), "-k", "2",
            "--task", X, "--task", Y, "--task", Z, "--concurrency", "2", "--isolation", "bwrap", "--mock-policy", str(policy),
            "--out", str(out), "--executor", "ray", "--ray-address", ray_cluster.address, "--json"]
    env = {**os.environ, "RAY_ADDRESS": ""}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 180
    while time.time() < deadline and not list(out.glob("rollouts/*/*/result.json")) and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # once: no new trial starts
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)  # twice: the running ones are cancelled on their nodes
    _, err = proc.communicate(timeout=60)  # returns: running trials were cancelled, not waited for to the end
    first = json.loads((out / "results.json").read_text())
    assert 1 <= first["n_trials"] < 6 and first["missing_trials"] == 6 - first["n_trials"]
    assert proc.returncode == 130, err[-3000:]
    assert "never retrieved" not in err and "TaskCancelledError" not in err and "Traceback" not in err, err[-3000:]
    stopped = [line for line in err.splitlines() if line.startswith("stopped: ")]
    assert stopped == [f"stopped: {first['n_trials']} of 6 trials finished (results so far: {out / 'results.json'}); "
                       f"resume with: ahe {shlex.join(argv[3:])}"], err[-3000:]
    finished = {p: p.read_text() for p in out.glob("rollouts/*/*/result.json")}

    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    res = json.loads(done.stdout)
    assert res["n_trials"] == 6 and res["pass_at_1"] == pytest.approx(2 / 6) and res["infra_errors"] == 0
    for path, text in finished.items():
        assert path.read_text() == text


def test_new_user_eval_with_auto_address_same_table_as_local_and_no_key_on_disk(ray_cluster, tmp_path):
    """`ahe eval --executor ray --ray-address auto` run from a folder outside the repository, with a key
    in the environment, against a cluster of `ray start` processes: the same pass@1 table as the local
    executor; the nodes ran the driver's own `ahe` (shipped with the job, not whatever the node's
    Python has); no key in any file of the cluster's folders (session logs, runtime envs, the nodes'
    caches and scratch)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(agent_policy()))
    argv = [sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(SEED), "--tasks", str(TASKS), "-k", "2",
            "--task", X, "--task", Y, "--task", Z, "--isolation", "bwrap", "--mock-policy", str(policy), "--json"]
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    # auto = the cluster `ray start` last wrote to $RAY_TMPDIR/ray/ray_current_cluster (the head's --temp-dir)
    env = {**os.environ, "RAY_ADDRESS": "", "RAY_TMPDIR": str(ray_cluster.temp_dir.parent), "OPENAI_API_KEY": PLANTED}
    assert (ray_cluster.temp_dir / "ray_current_cluster").read_text().strip() == ray_cluster.address
    runs = {}
    for name, extra in (("local", []), ("ray", ["--executor", "ray", "--ray-address", "auto"])):
        done = subprocess.run([*argv, "--out", str(tmp_path / name), *extra], capture_output=True, text=True,
                              timeout=300, env=env, cwd=cwd)
        assert done.returncode == 0, done.stderr[-3000:]
        runs[name] = summary(tmp_path / name)
    assert runs["ray"] == runs["local"] and runs["local"]["pass_at_1"] == pytest.approx(2 / 6)
    shipped = list(ray_cluster.temp_dir.glob("session_*/runtime_resources/py_modules_files/*/ahe/rollout/ray_worker.py"))
    assert shipped, "the driver's ahe package was not shipped to the nodes"
    needle = PLANTED.encode()
    assert grep_tree(ray_cluster.root, needle) == []
    assert grep_tree(tmp_path / "ray", needle) == []
    doctor = subprocess.run([sys.executable, "-m", "ahe.cli", "doctor", "--json", "--ray-address", "auto"],
                            capture_output=True, text=True, timeout=120, env=env, cwd=cwd)
    detail = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["ray cluster"]["detail"]
    assert detail.startswith(f"auto (joined {ray_cluster.address}): 2 alive node(s)"), detail  # which cluster auto found
