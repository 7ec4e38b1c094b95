"""The component map the evolve agent reads: which file of the harness is which component class,
in the words of the harness's agent backend (ahe, mini-swe-agent, command; docs/backends.md).

A manifest's `component` is one of the seven classes; for a third-party agent the files are
that agent's own (a mini-swe-agent config's templates, a CLI agent's AGENTS.md), so the agent
is told the map instead of guessing it from AHE's layout.
"""

from __future__ import annotations

from pathlib import Path

from evolve_agent.confine import WORKSPACE_MOUNT


def component_map_lines(workspace: Path) -> list[str]:
    """Lines for the evolve agent's first message; [] when the map cannot be read (the gate says why)."""
    from ahe.agents import harness_backend
    from ahe.errors import AheError

    try:
        backend = harness_backend(workspace)
        parts = backend.components(Path(workspace))
    except (AheError, OSError):
        return []
    if not parts:
        return []
    lines = [f"The harness is run by the `{backend.name}` agent backend ({backend.summary}). Its parts, and the "
             "component class to name in record_change for an edit to each:"]
    for part in parts:
        note = f" — {part.note}" if part.note else ""
        lines.append(f"- {WORKSPACE_MOUNT}/{part.path}: {part.component}{note}")
    if not backend.replayable:
        lines.append("Replay foresight cannot re-run this backend's recorded steps: its changes are recorded with "
                     "`replayable: false`, so your predicted_fixes and predicted_regressions carry the whole prediction.")
    return lines
