"""`ahe tasks check`: audit a task set before trusting it (DESIGN.md §6).

For each task, in fresh sandboxes:

* **load** — the folder loads and instruction.md is not empty;
* **oracle** — setup, then solution/solve.sh, then the verifier: it must pass;
* **nop** — setup, then nothing, then the verifier: it must *not* pass;
* **leak** — in the do-nothing sandbox, before the verifier: /tests must hold nothing (in a
  local sandbox it is an empty mount point; elsewhere it does not exist), neither the host
  task folder nor any of its tests/ files may be reachable, and no test file (by content
  hash) nor a distinctive line of a test file may be found under /app, /tmp or /logs. A test
  file the author also ships in environment/ (an original input kept for comparison, the
  project's visible tests) is a warning, not a failure — except tests/test.sh itself.

Sandboxes come from a `SandboxFactory` chosen per task by `runs_on`, so the docker backend
plugs in without changes here: `check_tasks(tasks, factories_for("docker"))` (ahe.tasks.sandboxes).
"""

from __future__ import annotations

import asyncio
import inspect
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ahe.sandbox.base import Sandbox
from ahe.tasks.leaks import probe_leaks
from ahe.tasks.loader import TaskLoadError
from ahe.tasks.model import Task
from ahe.tasks.sandboxes import SandboxFactory, factories_for
from ahe.tasks.snapshot import SEAL_DIR, TaskSeal, seal_summary, seal_tasks, unseal, verifier_task
from ahe.tempdirs import make_temp_dir
from ahe.tasks.phases import (
    DEFAULT_PASS_THRESHOLD,
    VerifierResult,
    run_oracle,
    run_setup,
    run_verifier,
)

Status = Literal["ok", "warn", "fail", "error", "skipped"]


class CheckItem(BaseModel):
    """One column of the check table."""

    status: Status
    detail: str = ""
    reward: float | None = None


def _skipped(detail: str) -> CheckItem:
    return CheckItem(status="skipped", detail=detail)


class TaskCheck(BaseModel):
    """The audit of one task."""

    name: str
    path: str
    runs_on: str | None = None
    load: CheckItem
    oracle: CheckItem
    nop: CheckItem
    leak: CheckItem
    duration_sec: float = 0.0
    hash: str | None = None  # the task folder's sealed hash (ahe.tasks.snapshot)

    @property
    def items(self) -> dict[str, CheckItem]:
        return {"load": self.load, "oracle": self.oracle, "nop": self.nop, "leak": self.leak}

    @property
    def ok(self) -> bool:
        """No item failed or errored (skipped and warned items are not failures)."""
        return all(i.status in ("ok", "warn", "skipped") for i in self.items.values())

    @property
    def skipped(self) -> bool:
        return self.load.status == "ok" and all(
            i.status == "skipped" for i in (self.oracle, self.nop, self.leak)
        )


class CheckReport(BaseModel):
    """All task audits, in name order; `ok` is what sets the exit code."""

    tasks: list[TaskCheck] = Field(default_factory=list)
    benchmark_hash: str | None = None  # over the checked tasks' hashes: what `ahe eval` records too

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tasks)

    def counts(self) -> dict[str, int]:
        skipped = sum(1 for t in self.tasks if t.ok and t.skipped)
        failed = sum(1 for t in self.tasks if not t.ok)
        return {
            "total": len(self.tasks),
            "passed": len(self.tasks) - skipped - failed,
            "failed": failed,
            "skipped": skipped,
        }

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "summary": self.counts(),
            "benchmark_hash": self.benchmark_hash,
            "tasks": [
                {**t.model_dump(mode="json"), "ok": t.ok} for t in self.tasks
            ],
        }


# --------------------------------------------------------------------------------------------
# the audit
# --------------------------------------------------------------------------------------------


async def _make(factory: SandboxFactory, task: Task, workdir: Path) -> Sandbox:
    workdir.mkdir(parents=True, exist_ok=True)
    made = factory(task, workdir)
    if inspect.isawaitable(made):
        made = await made
    return made  # type: ignore[return-value]


def _verdict_detail(v: VerifierResult) -> str:
    if v.error:
        return v.error
    return f"reward {v.reward:g}"


def _sealed(task: Task, seal: TaskSeal | None) -> Task:
    """The task whose solution/ and tests/ are the sealed snapshot's (checked against the seal first)."""
    return task if seal is None else verifier_task(task, seal, task.path)


async def _oracle(
    task: Task, factory: SandboxFactory, workdir: Path, threshold: float, seal: TaskSeal | None = None
) -> CheckItem:
    if not task.has_solution:
        return CheckItem(status="fail", detail="no solution/solve.sh to check the tests with")
    sandbox = await _make(factory, task, workdir)
    try:
        await sandbox.start()
        await run_setup(task, sandbox)
        solve = await run_oracle(_sealed(task, seal), sandbox)
        verdict = await run_verifier(_sealed(task, seal), sandbox, workdir / "verifier", pass_threshold=threshold)
    finally:
        await sandbox.stop()
    note = ""
    if solve.timed_out:
        note = f" (solve.sh timed out after {task.agent_timeout_sec:g}s)"
    elif solve.exit_code != 0:
        note = f" (solve.sh exited {solve.exit_code})"
    if verdict.passed:
        return CheckItem(status="ok", detail=_verdict_detail(verdict) + note, reward=verdict.reward)
    return CheckItem(
        status="fail",
        detail=f"oracle does not pass: {_verdict_detail(verdict)}{note}",
        reward=verdict.reward,
    )


async def _nop_and_leak(
    task: Task, factory: SandboxFactory, workdir: Path, threshold: float, seal: TaskSeal | None = None
) -> tuple[CheckItem, CheckItem]:
    sandbox = await _make(factory, task, workdir)
    try:
        await sandbox.start()
        await run_setup(task, sandbox)
        leaks = await probe_leaks(task, sandbox)
        verdict = await run_verifier(_sealed(task, seal), sandbox, workdir / "verifier", pass_threshold=threshold)
    finally:
        await sandbox.stop()
    if leaks.leaks:
        leak = CheckItem(status="fail", detail="; ".join(leaks.leaks + leaks.shared))
    elif leaks.shared:
        leak = CheckItem(status="warn", detail="; ".join(leaks.shared))
    else:
        leak = CheckItem(status="ok", detail="tests unreachable before the verifier")
    if verdict.passed:
        nop = CheckItem(
            status="fail",
            detail=f"a do-nothing agent passes ({_verdict_detail(verdict)})",
            reward=verdict.reward,
        )
    else:
        nop = CheckItem(status="ok", detail=_verdict_detail(verdict), reward=verdict.reward)
    return nop, leak


def _error_item(exc: BaseException) -> CheckItem:
    text = str(exc).strip() or type(exc).__name__
    return CheckItem(status="error", detail=f"{type(exc).__name__}: {text}"[:600])


async def check_task(
    task: Task,
    factories: Mapping[str, SandboxFactory],
    *,
    work_dir: Path,
    pass_threshold: float = DEFAULT_PASS_THRESHOLD,
    semaphore: asyncio.Semaphore | None = None,
    seal: TaskSeal | None = None,
) -> TaskCheck:
    """Audit one loaded task (see the module docstring). Never raises for a task's fault."""
    started = time.monotonic()
    load = CheckItem(status="ok", detail=f"{task.runs_on} task")
    if not task.instruction.strip():
        load = CheckItem(status="fail", detail=f"{task.instruction_path} is empty")

    factory = factories.get(task.runs_on)
    if factory is None and task.runs_on == "local":
        factory = factories.get("docker")
    if factory is None:
        reason = "skipped (needs --sandbox docker)" if task.runs_on == "docker" else "skipped"
        return TaskCheck(
            name=task.name, path=str(task.path), runs_on=task.runs_on, load=load,
            oracle=_skipped(reason), nop=_skipped(reason), leak=_skipped(reason),
        )

    sem = semaphore or asyncio.Semaphore(2)
    workdir = work_dir / task.name

    async def guarded_oracle() -> CheckItem:
        async with sem:
            try:
                return await _oracle(task, factory, workdir / "oracle", pass_threshold, seal)
            except Exception as exc:  # noqa: BLE001 - reported in the table, not raised
                return _error_item(exc)

    async def guarded_nop() -> tuple[CheckItem, CheckItem]:
        async with sem:
            try:
                return await _nop_and_leak(task, factory, workdir / "nop", pass_threshold, seal)
            except Exception as exc:  # noqa: BLE001
                err = _error_item(exc)
                return err, err

    oracle, (nop, leak) = await asyncio.gather(guarded_oracle(), guarded_nop())
    return TaskCheck(
        name=task.name, path=str(task.path), runs_on=task.runs_on,
        load=load, oracle=oracle, nop=nop, leak=leak,
        duration_sec=round(time.monotonic() - started, 2), hash=seal.hash if seal else None,
    )


def load_error_check(error: TaskLoadError) -> TaskCheck:
    """A row for a task that did not load."""
    skip = _skipped("skipped (task does not load)")
    return TaskCheck(
        name=error.name, path=str(error.path),
        load=CheckItem(status="fail", detail=error.message),
        oracle=skip, nop=skip, leak=skip,
    )


async def check_tasks(
    tasks: Sequence[Task],
    factories: Mapping[str, SandboxFactory] | None = None,
    *,
    load_errors: Sequence[TaskLoadError] = (),
    concurrency: int = 4,
    pass_threshold: float = DEFAULT_PASS_THRESHOLD,
    work_dir: Path | None = None,
    on_done: Callable[[TaskCheck], None] | None = None,
) -> CheckReport:
    """Audit `tasks` with at most `concurrency` sandboxes alive at once.

    `factories` maps a task's `runs_on` ("local" / "docker") to a `SandboxFactory`; a local
    task falls back to the docker factory, and a task with no factory is reported as
    skipped. Defaults to the local sandbox only. Sandboxes work under `work_dir` (kept) or a
    temporary folder (removed afterwards). `on_done` is called as each task finishes.
    """
    if factories is None:
        factories = factories_for("local")
    semaphore = asyncio.Semaphore(max(1, concurrency))
    own_dir = work_dir is None
    root = make_temp_dir("tasks-check") if own_dir else Path(work_dir)
    root.mkdir(parents=True, exist_ok=True)
    # a check judges the tasks as they are now: a kept --work-dir is sealed afresh (in a hidden folder,
    # apart from the per-task folders and from a run's own sealed/ should --work-dir be a run folder)
    seal_dir = root / f".{SEAL_DIR}"
    unseal(seal_dir)
    index = seal_tasks(tasks, seal_dir)  # the oracle and the verifiers run from this snapshot
    results = [load_error_check(e) for e in load_errors]
    if on_done:
        for r in results:
            on_done(r)

    async def one(task: Task) -> TaskCheck:
        result = await check_task(
            task, factories, work_dir=root, pass_threshold=pass_threshold, semaphore=semaphore,
            seal=index.tasks[task.name],
        )
        if on_done:
            on_done(result)
        return result

    try:
        results += await asyncio.gather(*(one(t) for t in tasks))
    finally:
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)
    results.sort(key=lambda r: r.name)
    return CheckReport(tasks=results, **({"benchmark_hash": seal_summary(index, [t.name for t in tasks])["benchmark_hash"]}
                                         if tasks else {}))
