"""Replay one change (its commit) over the last round's recorded trials: the at-risk tasks.

`replay_change` does the work in this process; `replay_change_isolated` runs it in a child
process with a wall-clock limit, so a change whose middleware hangs, exits the interpreter
or exhausts memory is reported as such and never takes the caller (the evolve phase) down.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from ahe.errors import AheError, ConfigError
from ahe.tempdirs import temp_dir
from evolve_agent.replay.checkout import changed_files, classify, export_commit, resolve
from evolve_agent.replay.compare import TrialOutcome, replay_pair
from evolve_agent.replay.engine import ReplaySession, replay_twin
from evolve_agent.replay.models import (MiddlewareFailure, ReplayReport, ReplaySettings, StepDiff, TaskImpact,
                                        TrialImpact)
from evolve_agent.replay.recorded import RecordedTrial, load_round

MAX_STEP_DIFFS = 5


def _load(root: Path, side: str) -> tuple[object | None, str | None]:
    from ahe.runtime import load_agent

    try:
        return load_agent(root), None
    except ConfigError as exc:
        return None, f"the harness {side} the change does not load: {exc}"
    except Exception as exc:  # user code at import time
        return None, f"the harness {side} the change does not load: {type(exc).__name__}: {exc}"


async def _replay_recorded(old, new, trials: list[RecordedTrial], report: ReplayReport) -> list[TrialOutcome]:
    """Every trial through both harnesses, recorded observations only (no tool runs)."""
    old_twin, new_twin = replay_twin(old), replay_twin(new)
    outcomes = []
    for trial in trials:
        try:
            pair = ReplaySession(old_twin, twin=True), ReplaySession(new_twin, twin=True)
            outcomes.append(await replay_pair(*pair, trial))
        except Exception as exc:  # a hook may raise what the runtime lets through; the others go on
            report.errors.append(f"{trial.task}/{trial.trial}: replay failed: {type(exc).__name__}: {exc}"[:300])
    return outcomes


def _merge(outcomes: list[TrialOutcome], extra: list[TrialOutcome]) -> None:
    """Fold re-execution findings into the recorded-replay outcome of the same trial."""
    by_key = {(o.trial.task, o.trial.trial): o for o in outcomes}
    for e in extra:
        o = by_key.get((e.trial.task, e.trial.trial))
        if o is None:
            outcomes.append(e)
            continue
        steps = {d.step: d for d in o.diffs}
        for d in e.diffs:
            if d.step in steps:
                steps[d.step].reasons += [r for r in d.reasons if r not in steps[d.step].reasons]
            else:
                steps[d.step] = d
        o.diffs = sorted(steps.values(), key=lambda d: d.step)
        o.steps_differing = max(o.steps_differing, e.steps_differing, len(o.diffs))
        o.new_errors += e.new_errors


def _report_tasks(report: ReplayReport, trials: list[RecordedTrial], outcomes: list[TrialOutcome]) -> None:
    passed: dict[str, list[bool]] = defaultdict(list)
    for t in trials:
        passed[t.task].append(bool(t.passed))
    impacts: dict[str, TaskImpact] = {}
    for o in outcomes:
        if not o.diffs:
            continue
        task = o.trial.task
        rates = passed.get(task, [])
        imp = impacts.setdefault(task, TaskImpact(task=task, passes=any(rates),
                                                  pass_rate=round(sum(rates) / len(rates), 4) if rates else None))
        imp.trials.append(TrialImpact(trial=o.trial.trial, passed=o.trial.passed, steps_differing=o.steps_differing,
                                      first=o.diffs[0], diffs=o.diffs[:MAX_STEP_DIFFS]))
    report.tasks = sorted(impacts.values(), key=lambda t: (not t.passes, t.task))
    report.at_risk = [t.task for t in report.tasks if t.passes]
    old_sigs = set().union(*(o.old_errors for o in outcomes)) if outcomes else set()
    failures: dict[tuple[str, str, str], MiddlewareFailure] = {}
    for o in outcomes:
        for mw, hook, err, ref in o.new_errors:
            if (mw, hook) in old_sigs:
                continue  # the harness before the change failed the same way: not this change's doing
            key = (mw, hook, err[:80])
            if key in failures:
                failures[key].count += 1
            else:
                failures[key] = MiddlewareFailure(middleware=mw, hook=hook, error=err, ref=ref)
    report.middleware_errors = list(failures.values())


async def replay_change_async(repo: Path, commit: str, iteration_dir: Path, *, base: str | None = None,
                              change_id: str | None = None, settings: ReplaySettings | None = None,
                              tasks_dir: Path | None = None) -> ReplayReport:
    """What the change at `commit` (against `base`, default its parent) does to the recorded trials."""
    settings = settings or ReplaySettings()
    t0 = time.monotonic()
    repo = Path(repo)
    new_c = resolve(repo, commit)
    old_c = resolve(repo, base or f"{new_c}^")
    report = ReplayReport(change_id=change_id, commit=new_c, base_commit=old_c, replayable=False)
    with temp_dir("replay") as tmp:
        files = changed_files(repo, old_c, new_c)
        old, err_old = _load(export_commit(repo, old_c, Path(tmp) / "before"), "before")
        new, err_new = _load(export_commit(repo, new_c, Path(tmp) / "after"), "after")
        if old is None or new is None:
            report.reason = "not replayed: " + (err_new or err_old or "")
            report.errors.append(report.reason)
            report.seconds = round(time.monotonic() - t0, 3)
            return report
        kinds, text, _schema, impl = classify(old, new, files)
        report.kinds, report.not_replayed, report.replayable = kinds, text, bool(kinds)
        if not kinds:
            report.reason = (f"not replayable: only text changed ({', '.join(text) or ', '.join(files) or 'nothing'}); "
                             "its effect on the model cannot be computed without a model")
            report.seconds = round(time.monotonic() - t0, 3)
            return report
        trials, errors = load_round(Path(iteration_dir))
        report.errors += errors
        outcomes = await _replay_recorded(old, new, trials, report)
        report.trials_replayed = len(outcomes)
        report.steps_replayed = sum(o.steps_replayed for o in outcomes)
        if impl and settings.reexec:
            from evolve_agent.replay.reexec import reexecute

            extra, info = await reexecute(old, new, impl, trials, settings=settings, tasks_dir=tasks_dir)
            report.reexec = info
            _merge(outcomes, extra)
        elif impl:
            report.reexec = {"skipped": "re-execution is turned off (evolve.replay.reexec)"}
        _report_tasks(report, trials, outcomes)
    report.reason = f"replayed {', '.join(kinds)} over {report.trials_replayed} recorded trial(s)"
    if text:
        report.reason += f"; not replayed (text): {', '.join(text)}"
    report.seconds = round(time.monotonic() - t0, 3)
    return report


def replay_change(repo: Path, commit: str, iteration_dir: Path, **kw) -> ReplayReport:
    return asyncio.run(replay_change_async(repo, commit, iteration_dir, **kw))


def replay_change_isolated(repo: Path, commit: str, iteration_dir: Path, *, base: str | None = None,
                           change_id: str | None = None, settings: ReplaySettings | None = None,
                           tasks_dir: Path | None = None) -> ReplayReport:
    """`replay_change` in a child process bounded by `settings.timeout_sec`; never raises."""
    settings = settings or ReplaySettings()
    job = {"repo": str(repo), "commit": commit, "iteration_dir": str(iteration_dir), "base": base,
           "change_id": change_id, "settings": settings.model_dump(), "tasks_dir": str(tasks_dir) if tasks_dir else None}
    failed = ReplayReport(change_id=change_id, commit=commit, replayable=False)
    from evolve_agent.replay.jailed import jailed_command

    try:
        with temp_dir("replay-jail") as tmp:
            # the change's hooks and tools run in this child: jailed like a rollout's worker
            jailed = jailed_command(job, Path(tmp))
            argv, env = [sys.executable, "-m", "evolve_agent.replay"], None
            if jailed is not None:
                argv, job, env = jailed
            proc = subprocess.run(argv, input=json.dumps(job), text=True, capture_output=True,
                                  timeout=settings.timeout_sec, env=env)
    except subprocess.TimeoutExpired:
        failed.reason = f"the replay did not finish within {settings.timeout_sec:g} s (evolve.replay.timeout_sec); a hook may hang"
        failed.errors.append(failed.reason)
        return failed
    try:
        return ReplayReport.model_validate_json(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        failed.reason = f"the replay process failed (exit {proc.returncode}): {tail[:300]}"
        failed.errors.append(failed.reason)
        return failed


def _main() -> None:
    """`python -m evolve_agent.replay`: a job as JSON on stdin, the report as one JSON line on stdout."""
    import logging

    logging.basicConfig(level=logging.ERROR)
    job = json.loads(sys.stdin.read())
    try:
        report = replay_change(
            Path(job["repo"]), job["commit"], Path(job["iteration_dir"]), base=job.get("base"),
            change_id=job.get("change_id"), settings=ReplaySettings.model_validate(job.get("settings") or {}),
            tasks_dir=Path(job["tasks_dir"]) if job.get("tasks_dir") else None)
    except AheError as exc:
        report = ReplayReport(change_id=job.get("change_id"), commit=job["commit"], replayable=False,
                              reason=f"not replayed: {exc}", errors=[str(exc)])
    sys.stdout.write("\n" + report.model_dump_json() + "\n")
