"""What a replay reports: per change, the tasks whose recorded steps it would alter.

A *step* is one agent step of a recorded trajectory (one model turn, its tool calls and their
results), named by its corpus file (`corpus/<task>/<trial>/step-NNN.md`). `at_risk` are the
tasks that pass today (in at least one trial) and whose steps the change alters: they are
what the replay predicts may regress.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ahe.harness.manifest import ReplaySummary
from ahe.sandbox.registry import SandboxName


class ReplaySettings(BaseModel):
    """Regression foresight: budgets of the replay of one change (`evolve.replay` in the experiment config, docs/foresight.md)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    timeout_sec: float = Field(default=300, gt=0)  # the whole replay of one change, re-execution included
    reexec: bool = True  # re-execute recorded commands when a tool implementation changed
    reexec_max_trials: int = Field(default=8, ge=0)  # trials re-executed per change (passing ones first)
    reexec_max_steps: int = Field(default=30, ge=1)  # agent steps re-executed per trial
    reexec_concurrency: int = Field(default=4, ge=1)  # sandboxes running at once
    reexec_trial_timeout_sec: float = Field(default=180, gt=0)  # the most one re-executed trial (both sides) may take
    reexec_sandbox: SandboxName | None = None  # None: the run's own `sandbox`


class StepDiff(BaseModel):
    """One recorded step the change would alter, and how."""

    step: int
    ref: str
    reasons: list[str]


class TrialImpact(BaseModel):
    trial: str
    passed: bool | None
    steps_differing: int
    first: StepDiff
    diffs: list[StepDiff] = Field(default_factory=list)  # the first few, for the report


class TaskImpact(BaseModel):
    task: str
    passes: bool  # passed in at least one recorded trial
    pass_rate: float | None = None
    trials: list[TrialImpact] = Field(default_factory=list)

    @property
    def steps_differing(self) -> int:
        return sum(t.steps_differing for t in self.trials)

    @property
    def first(self) -> StepDiff:
        return self.trials[0].first


class MiddlewareFailure(BaseModel):
    """A hook of the changed harness that raised (or returned something invalid) on recorded input."""

    middleware: str
    hook: str
    error: str
    ref: str
    count: int = 1


class ReplayReport(BaseModel):
    change_id: str | None = None
    commit: str | None = None
    base_commit: str | None = None
    replayable: bool
    reason: str = ""  # why not replayable, or what was replayed
    kinds: list[str] = Field(default_factory=list)  # middleware, tool_schema, tool_implementation, limits
    not_replayed: list[str] = Field(default_factory=list)  # changed files whose effect cannot be replayed
    trials_replayed: int = 0
    steps_replayed: int = 0
    tasks: list[TaskImpact] = Field(default_factory=list)
    at_risk: list[str] = Field(default_factory=list)
    middleware_errors: list[MiddlewareFailure] = Field(default_factory=list)
    reexec: dict[str, int | float | str] = Field(default_factory=dict)  # trials re-executed, skipped, seconds
    errors: list[str] = Field(default_factory=list)  # what went wrong in the replay itself
    seconds: float = 0.0

    @property
    def touched(self) -> list[str]:
        return [t.task for t in self.tasks]


def summarize(r: ReplayReport, report_path: str | None = None) -> ReplaySummary:
    """The compact form the manifest keeps."""
    return ReplaySummary(
        replayable=r.replayable,
        reason=r.reason,
        kinds=r.kinds,
        not_replayed=r.not_replayed,
        trials_replayed=r.trials_replayed,
        trials_touched=sum(len(t.trials) for t in r.tasks),
        tasks_touched=r.touched,
        first_steps={t.task: f"{t.first.ref}: {'; '.join(t.first.reasons)}" for t in r.tasks},
        middleware_errors=[f"{m.middleware}.{m.hook} raised {m.error} ({m.count}×, first at {m.ref})"
                           for m in r.middleware_errors],
        errors=r.errors,
        report=report_path,
        seconds=r.seconds,
    )
