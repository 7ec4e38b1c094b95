"""What every phase of an iteration works with (`PhaseContext`), and the few helpers the phases,
the verdict policies and best-of-N share: the rollout settings, the executor re-evaluation
trials run on, the evolve agent's limits. A module below the phases and the policies, so that
neither has to import the other."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from rich.console import Console

from ahe.config import ExperimentConfig
from ahe.harness.manifest import Manifest
from ahe.harness.repo import HarnessRepo
from ahe.llm.types import RoleConfig
from ahe.rollout.executor import Executor
from ahe.rollout.scheduler import RolloutConfig
from ahe.run_folder import RunFolder

if TYPE_CHECKING:
    from evolve_agent import EvolveLimits


class StopRequested(Exception):
    """Ctrl-C: the current phase was interrupted; it will be redone on --resume."""


class BudgetSpent(Exception):
    """A search strategy found nothing more the run's budget affords: the loop ends the run here,
    with a judged best (the message is the reason)."""


@dataclass
class PhaseContext:
    """What every phase works with: the config, the run folder, the harness repository."""

    cfg: ExperimentConfig
    run: RunFolder
    repo: HarnessRepo
    tasks_dir: Path  # the resolved task folder (a task source may have produced it)
    roles: dict[str, RoleConfig] = field(default_factory=dict)
    console: Console = field(default_factory=lambda: Console(stderr=True, quiet=True))
    should_stop: Callable[[], bool] = lambda: False
    executor: Executor | None = None  # None: trials in sandboxes (AsyncioExecutor); `ahe simulate` injects one
    evolve: Callable[..., Awaitable[Manifest]] | None = None  # None: the evolve agent; `ahe simulate` scripts it
    # the run's wall time so far in seconds, counted across resumes (the loop's clock: budgets.wall_clock_hours)
    elapsed: Callable[[], float] = lambda: 0.0


def rollout_config(ctx: PhaseContext) -> RolloutConfig:
    """The rollout of the live workspace under the experiment's rollout settings."""
    return RolloutConfig(
        **ctx.cfg.rollout_settings(),
        tasks_dir=ctx.tasks_dir,
        workspace=ctx.run.workspace,
        agent_role=ctx.roles["agent"],
        seal_dir=ctx.run.sealed,  # sealed once at the run's start (EvolutionLoop.context)
    )


@contextlib.contextmanager
def reeval_executor(ctx: PhaseContext):
    """The executor re-evaluation trials run on: the injected one, else the one `executor:` names
    (so under `executor: ray` they run on the cluster like the rounds), closed afterwards."""
    if ctx.executor is not None:
        yield ctx.executor
        return
    from ahe.rollout.scheduler import make_executor

    executor = make_executor(rollout_config(ctx), ctx.should_stop)
    try:
        yield executor
    finally:
        if hasattr(executor, "close"):
            executor.close()


def _replay_settings(ctx: PhaseContext) -> Any:
    """Regression foresight re-executes in the run's own sandbox backend unless told otherwise."""
    replay = ctx.cfg.evolve.replay
    return replay if replay.reexec_sandbox else replay.model_copy(update={"reexec_sandbox": ctx.cfg.sandbox})


def evolve_limits(ctx: PhaseContext) -> "EvolveLimits":
    from evolve_agent import EvolveLimits

    return EvolveLimits(max_turns=ctx.cfg.evolve.max_turns, wall_clock_sec=ctx.cfg.evolve.wall_clock_sec,
                        replay=_replay_settings(ctx))
