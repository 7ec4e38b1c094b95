"""Bounded re-execution: the recorded calls of a trial, run again with the old and the new tool.

Only when a tool's implementation changed, only trials that called a changed tool (passing
trials first, one per task before a second), at most `reexec_max_trials` trials and
`reexec_max_steps` steps each, each side in a fresh sandbox of the task (set up as for a
trial, in a temporary folder), `reexec_concurrency` sandboxes at once. Old and new run the
same recorded calls side by side, so what differs between their observations is the change's
doing, not the world's.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from pathlib import Path
from typing import Any

from ahe.tempdirs import temp_dir
from evolve_agent.replay.compare import TrialOutcome, replay_pair
from evolve_agent.replay.engine import ReplaySession
from evolve_agent.replay.models import ReplaySettings
from evolve_agent.replay.recorded import RecordedTrial


def choose(trials: list[RecordedTrial], tools: list[str], limit: int) -> list[RecordedTrial]:
    """Trials that used a changed tool: passing first, one per task before a task's second trial."""
    wanted = set(tools)
    using = [t for t in trials if t.tools_used() & wanted]
    rank: dict[str, int] = {}
    keyed = []
    for t in sorted(using, key=lambda t: (not t.passed, t.task, t.trial)):
        n = rank.get(t.task, 0)
        rank[t.task] = n + 1
        keyed.append((n, not t.passed, t.task, t.trial, t))
    return [k[-1] for k in sorted(keyed, key=lambda k: k[:4])][:limit]


async def _sandbox(factory: Any, task: Any, workdir: Path) -> Any:
    from ahe.tasks import run_setup

    workdir.mkdir(parents=True, exist_ok=True)
    sandbox = factory(task, workdir)
    if inspect.isawaitable(sandbox):
        sandbox = await sandbox
    await sandbox.start()
    await run_setup(task, sandbox)
    return sandbox


async def _one(old: Any, new: Any, trial: RecordedTrial, task: Any, factory: Any, settings: ReplaySettings) -> TrialOutcome:
    with temp_dir("reexec") as tmp:
        boxes: list[Any] = []
        try:
            async with asyncio.timeout(settings.reexec_trial_timeout_sec):
                boxes = list(await asyncio.gather(_sandbox(factory, task, Path(tmp) / "before"),
                                                  _sandbox(factory, task, Path(tmp) / "after")))
                pair = (ReplaySession(old, sandbox=boxes[0], execute=True), ReplaySession(new, sandbox=boxes[1], execute=True))
                return await replay_pair(*pair, trial, executed=True, max_steps=settings.reexec_max_steps)
        finally:
            for box in boxes:
                try:
                    await box.stop()
                except Exception:
                    pass


async def reexecute(old: Any, new: Any, tools: list[str], trials: list[RecordedTrial], *, settings: ReplaySettings,
                    tasks_dir: Path | None) -> tuple[list[TrialOutcome], dict[str, Any]]:
    """Outcomes of the re-executed trials and what was done (trials, skipped, seconds)."""
    t0 = time.monotonic()
    chosen = choose(trials, tools, settings.reexec_max_trials)
    info: dict[str, Any] = {"tools": ", ".join(tools), "candidates": len({(t.task, t.trial) for t in trials
                                                                         if t.tools_used() & set(tools)})}
    if not chosen:
        return [], {**info, "trials": 0}
    if tasks_dir is None:
        return [], {**info, "trials": 0, "skipped": "no task folder is known, so no sandbox can be set up"}
    from ahe.tasks import load_tasks
    from ahe.tasks.sandboxes import factories_for

    loaded = load_tasks(Path(tasks_dir))
    tasks = {t.name: t for t in loaded.tasks}
    broken = {e.name: e.message for e in loaded.errors}
    factories = factories_for(settings.reexec_sandbox or "local")
    sem = asyncio.Semaphore(max(1, settings.reexec_concurrency // 2))  # two sandboxes per trial
    problems: list[str] = []

    async def run(trial: RecordedTrial) -> TrialOutcome | None:
        task = tasks.get(trial.task)
        factory = factories.get(task.runs_on) if task is not None else None
        if factory is None:
            problems.append(f"{trial.task}: " + (broken.get(trial.task) or f"no task of that name in {tasks_dir}, or no "
                                                 f"{settings.reexec_sandbox or 'local'} sandbox for it"))
            return None
        async with sem:
            try:
                return await _one(old, new, trial, task, factory, settings)
            except TimeoutError:
                problems.append(f"{trial.task}/{trial.trial}: over {settings.reexec_trial_timeout_sec:g} s")
            except Exception as exc:
                problems.append(f"{trial.task}/{trial.trial}: {type(exc).__name__}: {exc}"[:200])
            return None

    done = [o for o in await asyncio.gather(*(run(t) for t in chosen)) if o is not None]
    info.update(trials=len(done), seconds=round(time.monotonic() - t0, 3))
    if problems:
        info["problems"] = "; ".join(problems)[:1000]
    return done, info
