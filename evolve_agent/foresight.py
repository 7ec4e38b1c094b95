"""Regression foresight at `record_change`: replay the committed change, keep the at-risk set.

The replay itself is `evolve_agent.replay` (in a bounded child process); this module stores
its report beside the manifest (`evolve/replay/<id>.json`), puts the summary and the at-risk
set on the manifest entry (`replay`, `replay_at_risk`) and gives the agent the text to read.
`revise_change` lets the agent update its own predictions after reading it, before the gate.
"""

from __future__ import annotations

import json
from typing import Any

from ahe.harness.manifest import ChangeEntry, ReplaySummary
from ahe.io import atomic_write_json
from ahe.runtime.tools import ToolResult
from evolve_agent.context import EvolveContext


def replay_recorded_change(ctx: EvolveContext, entry: ChangeEntry) -> str:
    """Replay `entry.commit` over this iteration's recorded trials; '' when replay is off."""
    from evolve_agent.replay import ReplaySettings, render_for_agent, replay_change_isolated, summarize

    settings = ctx.replay or ReplaySettings()
    if not settings.enabled or ctx.experiment_dir is None or not entry.commit:
        return ""
    it_dir = ctx.experiment_dir / "iterations" / f"{ctx.iteration:03d}"
    not_replayable = _backend_not_replayable(ctx.repo.path)
    if not_replayable:
        entry.replay = ReplaySummary(replayable=False, reason=not_replayable)
        entry.replay_at_risk = []
        return f"Replay: {not_replayable}."
    if not (it_dir / "rollouts").is_dir():
        entry.replay = ReplaySummary(replayable=False, reason="no recorded trials in this iteration to replay")
        entry.replay_at_risk = []
        return f"Replay: {entry.replay.reason}."
    report = replay_change_isolated(ctx.repo.path, entry.commit, it_dir, change_id=entry.id, settings=settings,
                                    tasks_dir=ctx.tasks_dir)
    rel = None
    if ctx.replay_dir is not None:
        path = ctx.replay_dir / f"{entry.id}.json"
        atomic_write_json(path, json.loads(report.model_dump_json()))
        try:
            rel = str(path.relative_to(it_dir))
        except ValueError:
            rel = str(path)
    entry.replay = summarize(report, rel)
    entry.replay_at_risk = list(report.at_risk)
    return render_for_agent(report)


def _backend_not_replayable(workspace) -> str | None:
    """Why replay cannot apply to this harness's backend, or None when it can (docs/backends.md)."""
    from ahe.agents import harness_backend
    from ahe.errors import AheError

    try:
        backend = harness_backend(workspace)
    except AheError:
        return None  # the gate reports a broken harness.yaml
    if backend.replayable:
        return None
    return (f"the {backend.name} backend's recorded steps cannot be re-run against a changed harness "
            "(its agent loop is not AHE's), so no replay; the predictions carry the whole forecast")


def revise_change(ctx: EvolveContext, session: Any, id: str, predicted_fixes: list[str] | None = None,
                  predicted_regressions: list[str] | None = None) -> ToolResult | str:
    """Update the predictions of a change recorded in this session (before the gate judges it)."""
    with ctx.lock:
        entry = ctx.repair_result if ctx.repair_id == id else (ctx.manifest.get(id) if ctx.repair_id is None else None)
        if entry is None or entry.status != "recorded":
            known = [c.id for c in ctx.manifest.changes if c.status == "recorded"]
            return ToolResult(content=f"no change {id!r} recorded in this session to revise; recorded: {known}",
                              is_error=True)
        named = (predicted_fixes or []) + (predicted_regressions or [])
        unknown = sorted({t for t in named if ctx.known_tasks and t not in ctx.known_tasks})
        if unknown:
            return ToolResult(content=f"unknown task name(s) {unknown}; predictions must name tasks of this experiment",
                              is_error=True)
        if predicted_fixes is not None:
            entry.predicted_fixes = list(dict.fromkeys(predicted_fixes))
        if predicted_regressions is not None:
            entry.predicted_regressions = list(dict.fromkeys(predicted_regressions))
        ctx.save_progress()
    if session is not None:
        try:
            session.note("change_revised", id=id, predicted_fixes=entry.predicted_fixes,
                         predicted_regressions=entry.predicted_regressions)
        except Exception:
            pass
    return (f"revised {id}: predicted_fixes {entry.predicted_fixes}, predicted_regressions "
            f"{entry.predicted_regressions} (the replay's at-risk set stays {entry.replay_at_risk}).")
