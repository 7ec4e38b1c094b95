"""Re-evaluation trials run where the rounds run: under `executor: ray` on the cluster, not on the driver."""

from __future__ import annotations

from pathlib import Path

from ahe.config import ExperimentConfig
from ahe.evolution.phases import PhaseContext, reeval_executor
from ahe.llm.types import RoleConfig
from ahe.rollout.executor import AsyncioExecutor
from ahe.run_folder import RunFolder


class _Injected:
    closed = False

    async def run(self, specs, *, on_event=None):
        return []

    def close(self):
        self.closed = True


def _ctx(tmp_path: Path, injected=None, **cfg) -> PhaseContext:
    tasks = tmp_path / "tasks"
    tasks.mkdir(exist_ok=True)
    return PhaseContext(cfg=ExperimentConfig(tasks=tasks, **cfg), run=RunFolder(tmp_path / "run"), repo=None,  # type: ignore[arg-type]
                        tasks_dir=tasks, executor=injected, roles={"agent": RoleConfig(model="m")})


def test_the_configured_executor_runs_reevaluation(tmp_path):
    from ahe.rollout.ray_executor import RayExecutor  # imports ray only when a trial runs

    with reeval_executor(_ctx(tmp_path, executor="ray", ray_address="10.0.0.1:6379", concurrency=7)) as ex:
        assert isinstance(ex, RayExecutor) and ex.address == "10.0.0.1:6379" and ex.concurrency == 7
    with reeval_executor(_ctx(tmp_path)) as ex:
        assert isinstance(ex, AsyncioExecutor)


def test_an_injected_executor_is_used_and_left_open(tmp_path):
    injected = _Injected()
    with reeval_executor(_ctx(tmp_path, injected=injected)) as ex:
        assert ex is injected
    assert not injected.closed  # the loop owns it
