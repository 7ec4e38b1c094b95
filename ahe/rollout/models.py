"""What rollouts write: result.json per trial and results.json per run (DESIGN.md §7)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ahe.llm.types import RoleConfig, Usage
from ahe.sandbox.registry import SandboxName
from ahe.tasks.snapshot import TaskSeal

# Why a trial did not pass, when it is not simply a wrong answer.
#   infra           the model endpoint or the sandbox failed (counted apart, retryable)
#   agent_timeout   the agent hit the task's wall-clock limit (counts as 0)
#   verifier_error  the verifier left no usable reward (counts as 0)
ErrorClass = Literal["infra", "agent_timeout", "verifier_error"]


class TrialSettings(BaseModel):
    """How every trial of a rollout runs: the one source these settings come from (config →
    RolloutConfig → TrialSpec copy them by inheritance, never field by field)."""

    # `model_requests_per_turn` is ours, not pydantic's: pydantic 2.6–2.9 warn on a `model_` field
    model_config = ConfigDict(protected_namespaces=())

    sandbox: SandboxName = "local"
    isolation: Literal["auto", "bwrap", "none"] = "auto"
    pass_threshold: float = 1.0
    agent_timeout_sec: float | None = None  # overrides task.toml when set
    verifier_timeout_sec: float | None = None
    keep_app: bool = False  # keep the trial's /app folder after grading
    # which agent runs the sessions (docs/backends.md); None = the harness's harness.yaml (default `ahe`)
    agent_backend: str | None = None
    # the gateway refuses a trial's model requests past this many per turn of its agent.yaml's
    # max_turns (middleware side calls and sub-agents share them; ahe/confine/budget.py)
    model_requests_per_turn: int = Field(default=4, ge=1, le=1000)


class RolloutSettings(TrialSettings):
    """What the scheduler needs on top: which tasks, how many trials, how many at once."""

    include: list[str] = Field(default_factory=list)  # task names or globs; empty = all
    k: int = Field(default=1, ge=1)
    concurrency: int = Field(default=4, ge=1)
    retry_infra: int = Field(default=0, ge=0)
    executor: Literal["local", "ray"] = "local"  # where trials run: this machine or a Ray cluster (docs/scale-out.md)
    ray_address: str | None = None  # with executor ray: auto (default), host:port, or ray://host:10001

    def trial_settings(self) -> dict:
        """The `TrialSettings` fields of these settings, to build a `TrialSpec` from."""
        return {name: getattr(self, name) for name in TrialSettings.model_fields}

    def rollout_settings(self) -> dict:
        return {name: getattr(self, name) for name in RolloutSettings.model_fields}


class TrialSpec(TrialSettings):
    """Everything needed to run one trial, serializable so a remote executor can run it."""

    task_dir: Path
    task_name: str
    trial: int  # 1-based
    trial_dir: Path
    workspace: Path
    agent_role: RoleConfig = Field(default_factory=RoleConfig)
    attempt: int = 1
    # the run's sealed verifiers (ahe.tasks.snapshot): the seal folder, or (set by a remote
    # executor) the task's seal itself, travelling with the spec; neither = the live folder
    seal_dir: Path | None = None
    sealed: TaskSeal | None = None


class TrialResult(BaseModel):
    task: str
    trial: int
    attempt: int = 1
    reward: float = 0.0  # what pass@1 counts: 0 for infra errors, timeouts, verifier errors
    raw_reward: float | None = None  # what the verifier said, when it said anything
    rewards: dict[str, float] = Field(default_factory=dict)
    passed: bool = False
    error_class: ErrorClass | None = None
    error: str | None = None
    stop_reason: str | None = None
    stop_detail: str | None = None  # why the session stopped, in the agent's (or its middleware's) words
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    usage: Usage = Field(default_factory=Usage)
    duration_sec: float = 0.0
    agent_duration_sec: float = 0.0
    verifier_duration_sec: float = 0.0
    started_at: str | None = None

    @property
    def infra(self) -> bool:
        return self.error_class == "infra"


class TaskSummary(BaseModel):
    task: str
    trials: int
    passed: int
    pass_rate: float  # mean binary reward over this task's trials
    pass_at_k: float
    rewards: list[float]
    infra_errors: int = 0
    timeouts: int = 0
    verifier_errors: int = 0
    mean_tokens: float = 0.0
    mean_duration_sec: float = 0.0
    reward_means: dict[str, float] = Field(
        default_factory=dict, description="mean of each reward.json key over the trials (missing = 0)"
    )


class RunResults(BaseModel):
    """results.json: per task and in total. pass@1 is the paper's: mean binary reward over all trials."""

    k: int
    tasks: dict[str, TaskSummary]
    n_trials: int
    n_passed: int
    pass_at_1: float
    pass_at_k: float
    infra_errors: int
    timeouts: int
    verifier_errors: int
    missing_trials: int = 0  # trials not run yet (a run still going or killed)
    usage: Usage = Field(default_factory=Usage)
    mean_tokens_per_trial: float = 0.0
    duration_sec: float = 0.0  # sum of trial durations
    wall_sec: float | None = None
    # mean of each reward key (reward.json) over all trials; a trial without the key counts 0,
    # as pass@1 counts a failed trial 0. SWE-CI tasks: evoscore, normalized_change, ...
    reward_means: dict[str, float] = Field(default_factory=dict)
    # the benchmark these results are on (ahe.tasks.snapshot): one hash over the task hashes
    benchmark_hash: str | None = None
    task_hashes: dict[str, str] = Field(default_factory=dict)
