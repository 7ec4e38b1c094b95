"""Regression foresight: replay recorded trajectories through a proposed change (docs/foresight.md).

    replay_change(repo, commit, iteration_dir) -> ReplayReport        in this process
    replay_change_isolated(...) -> ReplayReport                        in a bounded child process
    summarize(report) -> ReplaySummary                                 what the manifest keeps
    render_for_agent(report) -> str                                    what record_change answers
"""

from evolve_agent.replay.models import ReplayReport, ReplaySettings, summarize
from evolve_agent.replay.run import replay_change, replay_change_async, replay_change_isolated
from evolve_agent.replay.summary import render_for_agent

__all__ = ["ReplayReport", "ReplaySettings", "render_for_agent", "replay_change", "replay_change_async",
           "replay_change_isolated", "summarize"]
