"""The experiment configuration (`ahe init` writes one; `ahe evolve CONFIG` reads it).

Relative paths are resolved against the config file's folder. Secrets never live here:
a role names the environment variable that holds its key (`api_key_env`), and the copy
saved in the run folder (experiment.yaml) is written from this model, which has no key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ahe.errors import ConfigError
from ahe.llm.types import ROLES, RoleConfig
from ahe.runtime.config import format_validation_error, read_yaml
from ahe.rollout.models import RolloutSettings
from evolve_agent.replay.models import ReplaySettings


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Models(_Strict):
    agent: RoleConfig = Field(default_factory=RoleConfig)
    debugger: RoleConfig = Field(default_factory=RoleConfig)
    evolve: RoleConfig = Field(default_factory=RoleConfig)
    explore: RoleConfig | None = None  # default: the evolve role's settings (docs/explore.md)


class MockPolicies(_Strict):
    """Scripted MOCK models per role (demos and tests only): a policy file each."""

    agent: Path | None = None
    debugger: Path | None = None
    evolve: Path | None = None
    explore: Path | None = None  # default: the evolve role's policy


class Budgets(_Strict):
    wall_clock_hours: float | None = None
    max_tokens: dict[str, int] = Field(default_factory=dict)  # per role, or "total"
    max_cost_usd: dict[str, float] = Field(default_factory=dict)  # per role, or "total"
    # every trial the run makes: rollouts, re-evaluations, variants, tree children and finalists, held-out scoring
    max_trials: int | None = Field(default=None, ge=1)
    target_pass_at_1: float | None = Field(default=None, ge=0, le=1)

    @field_validator("max_tokens", "max_cost_usd")
    @classmethod
    def _known_roles(cls, value: dict) -> dict:
        """A misspelt role would never trip its budget: refuse it."""
        bad = [k for k in value if k not in ROLES and k != "total"]
        if bad:
            raise ValueError(f"unknown role {', '.join(map(repr, bad))}; use one of {', '.join(ROLES)} or total")
        return value


class AttributionSettings(_Strict):
    delta: float = Field(default=0.5, gt=0, le=2)  # in the metric's units (EvoScore spans [-1, 1])
    # a verdict policy of ahe.evolution.registry: expected-value (the winner of `ahe simulate --suite standard`,
    # docs/decisions.md), noise, paper (the paper's rule; "balanced" is its old name), lenient, strict,
    # keep-everything, or a plugin's; checked when the loop starts (the policies live above this layer)
    strictness: str = "expected-value"
    # targeted re-evaluation (noise, expected-value): extra trials per iteration, as a share of one round (tasks × k)
    reeval_share: float = Field(default=0.5, ge=0, le=4)
    # expected-value only: a round may spend up to this many times `reeval_share` while some decision is still
    # worth a trial, and stops as soon as none is (docs/decisions.md: 1.4× the paper's rollouts over the suite)
    reeval_ceiling: float = Field(default=2.0, ge=1, le=8)


class DebuggerSettings(_Strict):
    enabled: bool = True
    use_agent: bool = True
    concurrency: int = Field(default=4, ge=1)


class EvolveSettings(_Strict):
    max_turns: int = Field(default=80, ge=1)
    wall_clock_sec: float = Field(default=3600, gt=0)
    replay: ReplaySettings = Field(default_factory=ReplaySettings)


class ExploreSettings(_Strict):
    """The explore agent (docs/explore.md): off while `sources` is empty."""

    sources: list[str] = Field(default_factory=list)  # local folders or files (URLs where there is network)
    max_turns: int = Field(default=40, ge=1)
    wall_clock_sec: float = Field(default=1800, gt=0)
    max_source_mb: float = Field(default=20, gt=0)


class TreeSettings(BaseModel):
    """`search: tree` (docs/search.md): children per round, the expansion rule, pruning, finalists."""

    model_config = ConfigDict(extra="forbid")
    width: int = Field(default=2, ge=1, le=8, description="evolve calls (children) per round")
    rule: Literal["thompson", "ei"] = "ei"
    prune_z: float = Field(default=3.0, ge=0.0, description="prune a node whose mean + z*sd is below the best mean")
    finalists: int = Field(default=2, ge=1, le=8, description="nodes re-evaluated at the end")
    merge: bool = True
    seed: int = 0
    # under a token or dollar budget: stop a branch whose child's expected gain per unit of budget is
    # below this share of the best branch's (ahe.evolution.tree_budget, docs/search.md)
    stop_share: float = Field(default=0.25, ge=0.0, le=1.0)


class HoldoutSettings(_Strict):
    """A sealed held-out split (docs/config.md#holdout): every decision of `ahe evolve` sees only the
    search split; the returned `best` and the seed are scored once on the held-out tasks at the end."""

    share: float = Field(default=0.2, ge=0, lt=1)  # share of the tasks held out (ignored when `tasks` names them)
    seed: str = "ahe-holdout"  # the split is a hash of seed and task name: stable, not the folder order
    tasks: list[str] = Field(default_factory=list)  # explicit held-out task names (instead of a share)
    k: int | None = Field(default=None, ge=1)  # trials per held-out task and harness; default: the run's k


class ExperimentConfig(RolloutSettings, _Strict):
    """The experiment; its rollout fields (sandbox, isolation, k, concurrency, retry_infra,
    pass_threshold, agent/verifier timeouts, keep_app, include) are `RolloutSettings`."""

    name: str = "experiment"
    tasks: Path
    seed_workspace: Path | None = None  # default: the bundled harness_workspace
    iterations: int = Field(default=10, ge=1)
    k: int = Field(default=2, ge=1)
    concurrency: int = Field(default=8, ge=1)
    retry_infra: int = Field(default=1, ge=0)
    models: Models = Field(default_factory=Models)
    mock_policies: MockPolicies = Field(default_factory=MockPolicies)
    budgets: Budgets = Field(default_factory=Budgets)
    attribution: AttributionSettings = Field(default_factory=AttributionSettings)
    debugger: DebuggerSettings = Field(default_factory=DebuggerSettings)
    evolve: EvolveSettings = Field(default_factory=EvolveSettings)
    evaluate_final: bool = True  # evaluate the last harness too (and attribute its changes)
    # what attribution and H_best compare: the pass rate (the paper's) or the mean of one
    # reward key of reward.json, e.g. evoscore for SWE-CI tasks (docs/swe-ci.md)
    metric: str = Field(default="pass_rate", min_length=1)
    explore: ExploreSettings = Field(default_factory=ExploreSettings)
    # best-of-N per round (docs/variants.md): N evolve agents on branches, each evaluated, the
    # loop continues from the one the rule picks
    variants: int = Field(default=1, ge=1, le=16)
    variant_select: Literal["pass_at_1", "successes_per_mtok"] = "pass_at_1"
    # the search strategy of ahe.evolution.registry (docs/search.md): line (the paper's, default), best-of-n
    # (`variants` children per round; `variants: N` alone selects it), or a plugin's; checked when the loop starts
    search: str = Field(default="line", min_length=1)
    tree: TreeSettings = Field(default_factory=TreeSettings)  # search: tree only
    holdout: HoldoutSettings | None = None  # None: no held-out split (configs written before it keep their meaning)

    @model_validator(mode="after")
    def _search_and_variants(self) -> "ExperimentConfig":
        """`variants: N ≥ 2` is best-of-N (its meaning before `search:` existed); the two must agree."""
        named = "search" in self.model_fields_set
        if self.variants > 1 and not named:
            self.search = "best-of-n"
        elif self.search == "best-of-n" and self.variants < 2:
            raise ValueError("search: best-of-n needs `variants: N` with N ≥ 2 (the children per round); add it or use search: line")
        elif self.search == "line" and self.variants > 1:
            raise ValueError(f"search: line evolves one child per round, but variants is {self.variants}; "
                             "drop `variants` or use search: best-of-n")
        return self

    @model_validator(mode="after")
    def _policy_for_metric(self) -> "ExperimentConfig":
        """The default policy judges pass/fail evidence; with a reward-key metric (e.g. evoscore) the
        default is the paper's rule instead (docs/config.md). A policy named explicitly is kept."""
        if self.metric != "pass_rate" and "strictness" not in self.attribution.model_fields_set:
            self.attribution = self.attribution.model_copy(update={"strictness": "paper"})
        return self

    def resolve_paths(self, base: Path) -> "ExperimentConfig":
        def fix(p: Path | None) -> Path | None:
            return None if p is None else (p if p.is_absolute() else (base / p).resolve())

        from ahe.tasks.sources import is_source_spec

        return self.model_copy(
            update={
                "tasks": self.tasks if is_source_spec(self.tasks) else fix(self.tasks),
                "seed_workspace": fix(self.seed_workspace),
                "mock_policies": MockPolicies(
                    agent=fix(self.mock_policies.agent),
                    debugger=fix(self.mock_policies.debugger),
                    evolve=fix(self.mock_policies.evolve),
                    explore=fix(self.mock_policies.explore),
                ),
                "explore": self.explore.model_copy(update={"sources": [
                    s if s.startswith(("http://", "https://")) or Path(s).expanduser().is_absolute()
                    else str((base / s).resolve()) for s in self.explore.sources]}),
            }
        )


def load_experiment_config(path: Path) -> ExperimentConfig:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a mapping (tasks, iterations, k, models, ...)")
    try:
        cfg = ExperimentConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(path, err)) from None
    return cfg.resolve_paths(path.resolve().parent)


def dump_experiment_config(cfg: ExperimentConfig) -> str:
    """YAML of the resolved configuration; holds no secrets (keys live in env vars only)."""
    import yaml

    data = cfg.model_dump(mode="json")
    first = [k for k in _DUMP_ORDER if k in data]
    return yaml.safe_dump({**{k: data[k] for k in first}, **data}, sort_keys=False)


# experiment.yaml lists the experiment before the rollout settings it inherits
_DUMP_ORDER = ("name", "tasks", "include", "seed_workspace", "iterations", "k", "concurrency", "sandbox", "isolation",
               "retry_infra", "pass_threshold", "agent_timeout_sec", "verifier_timeout_sec", "keep_app")
