"""`ahe eval --sandbox docker`: a Dockerfile task built, run by the agent, graded; containers gone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from docker_support import base_image, docker_engine  # noqa: F401 - fixtures

from ahe.llm.types import RoleConfig
from ahe.rollout.scheduler import RolloutConfig, run_rollouts
from tests.conftest import SEED
from tests.test_tasks_docker import docker_task

pytestmark = pytest.mark.docker


async def test_eval_in_docker_builds_runs_grades_and_cleans_up(tmp_path: Path, docker_engine: Any, base_image: str, mock_llm) -> None:  # noqa: F811
    tasks = tmp_path / "tasks"
    docker_task(tasks, "rollout-count-lines", base_image)
    mock = mock_llm({"rules": [
        {"match": {"turn": 1}, "tool_calls": [{"name": "run_shell_command", "arguments": {"command": "wc -l < /app/input.txt | tr -d ' ' > /app/count.txt"}}]},
        {"reply": "done"},
    ]})
    role = RoleConfig(model="mock", base_url=mock.url, max_attempts=2, backoff_initial_sec=0.01, backoff_max_sec=0.02)
    out = tmp_path / "out"
    # only this task's containers: other docker tests may run theirs at the same time (-n)
    mine = {"label": "ahe.task=rollout-count-lines"}  # a name no other test uses
    before = {c.id for c in docker_engine.containers.list(all=True, filters=mine)}
    res = await run_rollouts(RolloutConfig(tasks_dir=tasks, workspace=SEED, agent_role=role, k=2, concurrency=2, sandbox="docker"), out)
    assert res.n_trials == 2 and res.n_passed == 2 and res.infra_errors == 0, json.loads(res.model_dump_json())
    trial = out / "rollouts" / "rollout-count-lines" / "trial-1"
    assert json.loads((trial / "verifier" / "reward.json").read_text()) == {"reward": 1}
    traj = json.loads((trial / "trajectory.json").read_text())
    assert traj["steps"][2]["observation"]["results"][0]["content"].startswith("exit code: 0")
    after = {c.id for c in docker_engine.containers.list(all=True, filters=mine)}
    assert after <= before  # every trial container was removed
