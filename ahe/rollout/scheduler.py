"""Rollouts: every task × k trials of one harness, resumable, into one output folder.

Layout (DESIGN.md §7)::

    <out>/harness.json                       the harness evaluated (path, git commit, code hash)
    <out>/rollouts/<task>/trial-<n>/         trajectory.json, events.jsonl, verifier/, result.json
    <out>/results.json                       per task and in total (pass@1, pass@k, tokens, ...)
    <out>/events.jsonl                       one line per trial end

Re-running on the same folder re-runs only trials without a result.json (and, with
`retry_infra`, trials that ended in an infrastructure error and have attempts left).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Callable, Sequence

from pydantic import BaseModel, Field

from ahe.errors import AheError
from ahe.llm.types import RoleConfig
from ahe.rollout.executor import AsyncioExecutor, Executor, OnEvent
from ahe.rollout.metrics import summarize
from ahe.rollout.models import RolloutSettings, RunResults, TrialResult, TrialSpec
from ahe.rollout.trial import load_result
from ahe.runtime.trace import EventLog
from ahe.io import atomic_write_json


class RolloutConfig(RolloutSettings):
    """One rollout: the settings, plus the tasks, the harness and the agent's model."""

    tasks_dir: Path
    workspace: Path
    agent_role: RoleConfig = Field(default_factory=RoleConfig)
    # where the run's tasks are sealed (ahe.tasks.snapshot); None = <out>/sealed. A run of several
    # rollouts (evolve, transfer) names one folder, sealed once at its start.
    seal_dir: Path | None = None


class Plan(BaseModel):
    specs: list[TrialSpec]
    done: list[TrialResult]
    expected: dict[str, int]
    skipped_tasks: list[str] = Field(default_factory=list)  # broken tasks, with their error
    needs_docker: list[str] = Field(default_factory=list)  # tasks that only run with --sandbox docker
    seal_dir: Path | None = None
    seal: dict = Field(default_factory=dict)  # benchmark_hash and task_hashes of the tasks that run
    task_dirs: dict[str, Path] = Field(default_factory=dict)  # the live folders, checked again at the end


def trial_dir(out: Path, task: str, trial: int) -> Path:
    return out / "rollouts" / task / f"trial-{trial}"


def _git_commit(path: Path) -> str | None:
    try:
        p = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def loads_harness(executor: Executor | None) -> bool:
    """Whether trials through `executor` load the harness, so a broken one must fail before they start;
    the decision simulator's executor (`loads_harness = False`) draws outcomes and never loads it."""
    return executor is None or getattr(executor, "loads_harness", True)


def plan_rollouts(cfg: RolloutConfig, out: Path, *, check_load: bool = True) -> Plan:
    """Which trials still need running; loads tasks and the workspace first (fail fast).
    `check_load=False` for an executor that never loads the harness (`loads_harness = False`)."""
    from ahe.agents.checks import check_harness_loads
    from ahe.tasks import load_tasks
    from ahe.tasks.sandboxes import can_run
    from ahe.tasks.snapshot import SEAL_DIR, seal_summary, seal_tasks

    # A broken harness fails here, before any sandbox starts; loaded in a confined worker, as
    # every trial will load it: AHE's own process never imports the harness's code.
    if check_load:
        check_harness_loads(cfg.workspace, cfg.isolation, cfg.agent_backend)
    loaded = load_tasks(cfg.tasks_dir, include=cfg.include or None)
    if not loaded.tasks and not loaded.errors:
        where = f" matching {', '.join(cfg.include)}" if cfg.include else ""
        raise AheError(f"--tasks {cfg.tasks_dir}: no task folders{where} (a task folder has a task.toml)")
    seal_dir = (cfg.seal_dir or out / SEAL_DIR).resolve()
    index = seal_tasks(loaded.tasks, seal_dir)  # new tasks are snapshotted; sealed ones must be unchanged
    specs, done, expected, needs_docker, task_dirs = [], [], {}, [], {}
    workspace = cfg.workspace.resolve()  # once, not once per trial
    skipped = [f"{e.path}: {e.message}" for e in loaded.errors]
    for task in loaded.tasks:
        if not can_run(cfg.sandbox, task):
            if task.runs_on == "docker":
                needs_docker.append(task.name)
            else:
                skipped.append(f"{task.path}: the {cfg.sandbox} sandbox does not run {task.runs_on} tasks")
            continue
        expected[task.name] = cfg.k
        task_dirs[task.name] = task.path
        for n in range(1, cfg.k + 1):
            tdir = trial_dir(out, task.name, n)
            prev = load_result(tdir)
            if prev is not None and not (prev.infra and prev.attempt <= cfg.retry_infra):
                done.append(prev)
                continue
            specs.append(
                TrialSpec(
                    **cfg.trial_settings(),
                    seal_dir=seal_dir,
                    task_dir=task.path,
                    task_name=task.name,
                    trial=n,
                    trial_dir=tdir,
                    workspace=workspace,
                    agent_role=cfg.agent_role,
                    attempt=(prev.attempt + 1) if prev is not None else 1,
                )
            )
    if not expected:
        raise AheError(_nothing_runs(cfg, skipped, needs_docker))
    return Plan(specs=specs, done=done, expected=expected, skipped_tasks=skipped, needs_docker=needs_docker,
                seal_dir=seal_dir, seal=seal_summary(index, list(expected)), task_dirs=task_dirs)


def _nothing_runs(cfg: RolloutConfig, broken: list[str], needs_docker: list[str]) -> str:
    """One sentence for a run in which no task can run: never an empty table that reads as a score of 0."""
    parts = []
    if needs_docker:
        parts.append(f"{len(needs_docker)} {'needs' if len(needs_docker) == 1 else 'need'} Docker (run with --sandbox docker)")
    if broken:
        parts.append(f"{len(broken)} {'is' if len(broken) == 1 else 'are'} broken (first: {broken[0]})")
    return (f"--tasks {cfg.tasks_dir}: no task can run under the {cfg.sandbox} sandbox: "
            f"{'; '.join(parts)}; nothing was run.")


async def run_rollouts(
    cfg: RolloutConfig,
    out: Path,
    *,
    executor: Executor | None = None,
    on_event: OnEvent | None = None,
    plan: Plan | None = None,
    should_stop: Callable[[], bool] | None = None,
    limit: asyncio.Semaphore | None = None,
) -> RunResults:
    """The plan's trials into `out`. Without an `executor`, a local one of its own, bounded by `limit`
    when given (a semaphore shared by rollouts running side by side), else by cfg.concurrency."""
    out.mkdir(parents=True, exist_ok=True)
    plan = plan or plan_rollouts(cfg, out, check_load=loads_harness(executor))
    atomic_write_json(
        out / "harness.json",
        {"workspace": str(cfg.workspace.resolve()), "commit": _git_commit(cfg.workspace), "code_hash": _code_hash(cfg.workspace)},
    )
    owned = executor is None
    executor = executor or make_executor(cfg, should_stop, limit)
    events = EventLog(out / "events.jsonl")
    t0 = time.monotonic()
    results = {(r.task, r.trial): r for r in plan.done}

    def record(kind: str, spec: TrialSpec, res: TrialResult | None, **info: str) -> None:
        if kind == "end" and res is not None:
            results[(res.task, res.trial)] = res
            events.emit(
                "trial_end",
                task=res.task,
                trial=res.trial,
                attempt=res.attempt,
                passed=res.passed,
                error_class=res.error_class,
                tokens=res.usage.total_tokens,
                duration_sec=res.duration_sec,
            )
        if on_event:
            on_event(kind, spec, res, **info)

    pending: Sequence[TrialSpec] = plan.specs
    try:
        while pending:
            finished = await executor.run(pending, on_event=record)
            pending = [
                spec.model_copy(update={"attempt": res.attempt + 1})
                for spec, res in zip(pending, finished)
                if res is not None and res.infra and res.attempt <= cfg.retry_infra
            ]
        _check_sealed(plan)  # a task rewritten during the last trials stops the run too
    finally:
        if owned and hasattr(executor, "close"):
            executor.close()
        if owned and getattr(executor, "ctx", None) is not None:
            await executor.ctx.aclose()  # its spare confined workers and connection pools
        summary = summarize(list(results.values()), k=cfg.k, expected=plan.expected)
        summary.wall_sec = round(time.monotonic() - t0, 3)
        summary.benchmark_hash, summary.task_hashes = plan.seal.get("benchmark_hash"), plan.seal.get("task_hashes", {})
        atomic_write_json(out / "results.json", json.loads(summary.model_dump_json()))
        events.close()
    return summary


def _check_sealed(plan: Plan) -> None:
    """Every task of the rollout still as sealed (`TaskChanged` names the task and the file)."""
    if plan.seal_dir is None:
        return
    from ahe.tasks.snapshot import check_folder, load_index

    index = load_index(plan.seal_dir)
    for name, folder in plan.task_dirs.items():
        check_folder(index.tasks[name], folder)


def make_executor(cfg: RolloutConfig, should_stop: Callable[[], bool] | None = None,
                  limit: asyncio.Semaphore | None = None) -> Executor:
    """The executor `cfg.executor` names; Ray is imported only when asked for (its nodes' CPUs bound
    it; `limit` bounds a local one)."""
    if cfg.executor == "ray":
        from ahe.rollout.ray_executor import RayExecutor

        return RayExecutor(cfg.ray_address, cfg.concurrency, should_stop)
    return AsyncioExecutor(cfg.concurrency, should_stop=should_stop, limit=limit)


def _code_hash(workspace: Path) -> str:
    from ahe.runtime.imports import code_hash

    return code_hash(workspace)
