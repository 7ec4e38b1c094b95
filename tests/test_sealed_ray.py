"""Sealed verifiers under the Ray executor: the snapshot travels to the node like a task folder.

A real local Ray cluster (tests/ray_support.py), real bwrap on the node, the mock model over
HTTP. The harness tries to rewrite the tasks' tests/test.sh and is refused by its confinement
(ahe/confine), so the rewrite comes from outside, on the host, while the run goes on (the Ray
nodes' runners do not see a test's AHE_CONFINE=none): the trials are judged by the snapshot the
node received (the forged verifier never runs), and the run stops with the sentence naming
the task and the file.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from ahe.rollout.scheduler import run_rollouts
from ahe.tasks.snapshot import TaskChanged
from tests.ray_support import ray_cluster  # noqa: F401  (fixture)
from tests.test_sealed_verifiers import FORGED_TEST, HONEST_TEST, _cfg, hostile_workspace, make_tasks

pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.timeout(600)]


def test_on_ray_the_snapshot_judges_and_a_rewritten_task_stops_the_run(ray_cluster, mock_llm, tmp_path):  # noqa: F811
    tasks = make_tasks(tmp_path / "tasks")
    ws = hostile_workspace(tmp_path / "ws", tasks)
    mock = mock_llm({"rules": [{"reply": "done"}]})
    out = tmp_path / "out"
    cfg = _cfg(tasks, ws, mock.url, k=1, concurrency=1, executor="ray", ray_address=ray_cluster.address)
    stop = threading.Event()

    def forge_once_a_trial_runs() -> None:  # what an escaped harness would do, from the host
        while not stop.is_set() and not any(out.glob("rollouts/*/*")):
            time.sleep(0.01)
        for test in tasks.glob("*/tests/test.sh"):
            test.write_text(FORGED_TEST)

    forger = threading.Thread(target=forge_once_a_trial_runs, daemon=True)
    forger.start()
    try:
        with pytest.raises(TaskChanged, match=r"^task (alpha|beta) changed during the run: tests/test.sh was changed"):
            asyncio.run(run_rollouts(cfg, out))
    finally:
        stop.set()
        forger.join(5)
    assert (tasks / "alpha" / "tests" / "test.sh").read_text() != HONEST_TEST  # the attack did rewrite the host
    results = json.loads((out / "results.json").read_text())
    assert results["n_passed"] == 0 and results["infra_errors"] == 0
    judged = [json.loads(p.read_text()) for p in out.glob("rollouts/*/*/result.json")]
    assert judged and all(r["raw_reward"] == 0.0 for r in judged)  # the sealed verifier, not the forged one
    assert results["benchmark_hash"] and set(results["task_hashes"]) == {"alpha", "beta"}
