"""The explore agent: seeds the harness with a few reusable skills from sources the user points at.

A fourth workspace on the same runtime (`explore_agent/workspace/`), run once in iteration 1
when the experiment config has `explore: {sources: [...]}` (docs/explore.md). Its skills go
through the evolve agent's record/validation path and into iteration 1's manifest.
"""

from explore_agent.phase import WORKSPACE, ExploreLimits, run_explore_phase
from explore_agent.sources import snapshot_sources

__all__ = ["ExploreLimits", "WORKSPACE", "run_explore_phase", "snapshot_sources"]
