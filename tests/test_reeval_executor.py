"""Every trial of a run goes where the config says: under `executor: ray` the rounds and the
re-evaluation trials share one executor for the whole run, on the cluster, not on the driver."""

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
    tasks.mkdir(parents=True, exist_ok=True)
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


def test_an_evolve_run_on_ray_shares_one_executor_across_phases(tmp_path):
    """A new Ray executor per rollout restarted the runners every iteration; the loop owns one."""
    from ahe.evolution.loop import EvolutionLoop
    from ahe.rollout.ray_executor import RayExecutor

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    loop = EvolutionLoop(ExperimentConfig(tasks=tasks, executor="ray", ray_address="10.0.0.1:6379"), tmp_path / "run")
    ctx = _ctx(tmp_path / "x", executor="ray", ray_address="10.0.0.1:6379")
    owned = loop._shared_executor(ctx)
    assert isinstance(owned, RayExecutor) and ctx.executor is owned
    with reeval_executor(ctx) as ex:  # re-evaluation uses the same one and leaves it open
        assert ex is owned
    injected = _Injected()
    assert loop._shared_executor(_ctx(tmp_path / "y", injected=injected)) is None
