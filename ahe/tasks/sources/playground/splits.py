"""Held-out splits by project: a harness evolved on some projects is checked on others.

Splitting by project, not by task, keeps every task of a held-out project unseen: tasks of one
project share code, tests and wording, so a split inside a project would leak.
"""

from __future__ import annotations

import hashlib
import math

from ahe.errors import AheError


def holdout_projects(projects: list[str], fraction: float, seed: str = "ahe-playground") -> list[str]:
    """The projects to hold out: round(fraction × n), at least one, never all; stable for a
    given seed and set of names (ordered by a hash, not by the order given)."""
    if not 0 <= fraction < 1:
        raise AheError(f"--holdout {fraction} must be at least 0 and below 1 (the share of projects held out).")
    if fraction == 0:
        return []
    if len(projects) < 2:
        raise AheError(f"--holdout splits by project and needs at least 2 projects, got {len(projects)}; "
                       "pass more --project folders (or a folder of projects), or leave --holdout out.")
    n = min(len(projects) - 1, max(1, math.floor(fraction * len(projects) + 0.5)))
    ranked = sorted(projects, key=lambda p: hashlib.sha256(f"{seed}:{p}".encode()).hexdigest())
    return sorted(ranked[:n])
