"""The edit manifest: every change the evolve agent makes, as a falsifiable prediction.

One entry per logical edit, validated here and committed as exactly one commit. The next
iteration checks `predicted_fixes` and `predicted_regressions` against what flipped
(`ahe.evolution.attribution`). Field by field reference: docs/manifest.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ahe.agents.base import ComponentClass

Component = ComponentClass  # the seven component classes (one definition, in ahe.agents.base)
ChangeKind = Literal["new", "improvement", "rollback"]
ChangeStatus = Literal["recorded", "accepted", "rejected"]

# Fields AHE fills in; the evolve agent may not set them through `record_change`.
AHE_FIELDS = (
    "commit",
    "status",
    "gate_errors",
    "gate_warnings",
    "evidence_missing",
    "superseded_commits",
    "revert_commits",
    "replay_at_risk",
    "replay",
    "origin",
)


class Evidence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str
    ref: str = Field(description="a corpus file, e.g. corpus/<task>/trial-2/step-014.md")
    note: str = ""


class ReplaySummary(BaseModel):
    """What replaying the change over the last round's recorded trials found (docs/foresight.md).

    The full report is `evolve/replay/<id>.json`; this is what the manifest keeps.
    """

    replayable: bool
    reason: str = ""
    kinds: list[str] = Field(default_factory=list)  # middleware, tool_schema, tool_implementation, limits
    not_replayed: list[str] = Field(default_factory=list)  # changed files whose effect no replay computes
    trials_replayed: int = 0
    trials_touched: int = 0
    tasks_touched: list[str] = Field(default_factory=list)
    first_steps: dict[str, str] = Field(default_factory=dict)  # task -> "corpus ref: what differs"
    middleware_errors: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    report: str | None = None  # the full report, relative to the iteration folder
    seconds: float = 0.0


class ChangeEntry(BaseModel):
    """What the evolve agent submits through `record_change` (commit/status filled by AHE)."""

    model_config = ConfigDict(extra="forbid")

    # chg-N; under `search: tree` a node's change is n{NNN}-chg-N (unique across the tree, ahe.evolution.tree)
    id: str = Field(pattern=r"^(n[0-9]{3}-)?chg-[0-9]+$")
    kind: ChangeKind = "new"
    component: Component
    files: list[str] = Field(min_length=1)
    summary: str = Field(min_length=5)
    failure_evidence: list[Evidence] = Field(default_factory=list)
    root_cause: str = Field(min_length=5)
    targeted_fix: str = Field(min_length=5)
    why_this_component: str = ""
    predicted_fixes: list[str] = Field(default_factory=list)
    predicted_regressions: list[str] = Field(default_factory=list)
    commit: str | None = None
    status: ChangeStatus = "recorded"
    gate_errors: list[str] = Field(default_factory=list)
    # Filled by AHE (added compatibly: all have defaults).
    gate_warnings: list[str] = Field(default_factory=list)  # reported, not blocking
    evidence_missing: list[str] = Field(default_factory=list)  # evidence refs that name no file
    superseded_commits: list[str] = Field(default_factory=list)  # earlier attempts (gate repair)
    revert_commits: list[str] = Field(default_factory=list)  # commits that undid attempts
    # Regression foresight: tasks passing today whose recorded steps the change alters.
    replay_at_risk: list[str] = Field(default_factory=list)
    replay: ReplaySummary | None = None
    origin: Literal["evolve", "explore"] = "evolve"  # which agent recorded it (docs/explore.md)

    @field_validator("files")
    @classmethod
    def _relative(cls, files: list[str]) -> list[str]:
        for f in files:
            if f.startswith("/") or ".." in f.split("/"):
                raise ValueError(f"file {f!r} must be a path inside the workspace (relative, no '..')")
        return files


class Refusal(BaseModel):
    """An action of the evolve agent that AHE refused or undid (confinement, protection)."""

    tool: str
    reason: str
    path: str | None = None
    command: str | None = None
    session: str = "main"  # "main" or "repair chg-N"


class Discard(BaseModel):
    """Uncommitted edits thrown away at the end of a session (never recorded as a change)."""

    files: list[str]
    reason: str
    session: str = "main"


class Manifest(BaseModel):
    iteration: int
    base_commit: str  # the harness the evolve agent started from
    changes: list[ChangeEntry] = Field(default_factory=list)
    # Filled by run_evolve_phase (added compatibly: all have defaults).
    head_commit: str | None = None  # the workspace after the gate
    stop_reason: str | None = None  # how the evolve agent's main session ended
    infra_error: str | None = None  # the evolve model (or the phase) failed; see docs/manifest.md
    shell_isolated: bool | None = None  # whether the agent's shell ran in the bwrap jail
    refusals: list[Refusal] = Field(default_factory=list)
    discarded: list[Discard] = Field(default_factory=list)
    gate_notes: list[str] = Field(default_factory=list)  # gate-wide remarks (lint skipped, ...)
    usage: dict[str, int | float] = Field(default_factory=dict)  # tokens (and cost) of all sessions

    def accepted(self) -> list[ChangeEntry]:
        return [c for c in self.changes if c.status == "accepted" and c.commit]

    def rejected(self) -> list[ChangeEntry]:
        return [c for c in self.changes if c.status == "rejected"]

    def get(self, change_id: str) -> ChangeEntry | None:
        for c in self.changes:
            if c.id == change_id:
                return c
        return None

    def next_id(self) -> str:
        numbers = [int(c.id.rsplit("-", 1)[1]) for c in self.changes]
        return f"chg-{max(numbers, default=0) + 1}"


def write_manifest(path: Path, manifest: Manifest) -> None:
    """Atomic write (temporary file, then rename)."""
    from ahe.io import atomic_write_json

    atomic_write_json(Path(path), json.loads(manifest.model_dump_json()))

