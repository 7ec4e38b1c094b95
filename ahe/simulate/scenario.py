"""The simulator's scenario file (YAML): the hidden world a policy is judged against.

Every field has a default close to Terminal-Bench 2 with the paper's manifests (89 tasks,
pass@1 ≈ 0.70, 15 % flaky tasks, fix precision 33.7 % / recall 51.4 %, regression precision
11.8 % / recall 11.1 %), so `ahe simulate` with no file is the reference scenario. Field by
field reference: docs/decisions.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ahe.errors import ConfigError

EffectKind = Literal["beneficial", "neutral", "harmful", "mixed"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskMix(_Strict):
    """Base success probabilities of the seed harness, task by task."""

    count: int = Field(default=89, ge=2, le=2000)
    pass_at_1: float = Field(default=0.70, gt=0, lt=1, description="mean base success probability")
    flaky_share: float = Field(default=0.15, ge=0, le=1)
    flaky_range: tuple[float, float] = (0.2, 0.8)
    solid_pass: tuple[float, float] = (0.95, 1.0)  # p of a task the seed solves
    solid_fail: tuple[float, float] = (0.0, 0.05)  # p of a task the seed fails


class EffectMix(_Strict):
    """The hidden true effects of the scripted changes."""

    weights: dict[EffectKind, float] = Field(
        default_factory=lambda: {"beneficial": 0.35, "neutral": 0.35, "harmful": 0.2, "mixed": 0.1}
    )
    beneficial_tasks: tuple[int, int] = (1, 4)  # how many tasks a beneficial change helps
    harmful_tasks: tuple[int, int] = (1, 3)  # how many tasks a harmful change hurts
    gain: tuple[float, float] = (0.4, 0.8)  # rise of the success probability on a helped task
    loss: tuple[float, float] = (0.4, 0.8)  # fall on a hurt task
    cap: float = Field(default=0.97, gt=0, le=1, description="no task passes more often than this, however many changes help it")

    @model_validator(mode="after")
    def _weights(self) -> "EffectMix":
        if not self.weights or sum(self.weights.values()) <= 0 or min(self.weights.values()) < 0:
            raise ValueError("changes.effects.weights: give non-negative weights with a positive sum")
        return self


class ManifestQuality(_Strict):
    """How well the scripted evolve agent's manifests predict (the paper's measured values)."""

    fix_precision: float = Field(default=0.337, gt=0, le=1)
    fix_recall: float = Field(default=0.514, ge=0, le=1)
    regression_precision: float = Field(default=0.118, gt=0, le=1)
    regression_recall: float = Field(default=0.111, ge=0, le=1)


class Changes(_Strict):
    per_iteration: tuple[int, int] = (2, 3)  # changes the scripted evolve phase commits per iteration
    effects: EffectMix = Field(default_factory=EffectMix)


class Scenario(_Strict):
    name: str = "tb2-paper-manifests"
    description: str = "Terminal-Bench-2-like tasks at k=2 with manifests as good as the paper's"
    seeds: int = Field(default=50, ge=1)
    first_seed: int = 0
    iterations: int = Field(default=10, ge=1)
    k: int = Field(default=2, ge=1)
    tasks: TaskMix = Field(default_factory=TaskMix)
    changes: Changes = Field(default_factory=Changes)
    manifests: ManifestQuality = Field(default_factory=ManifestQuality)
    policies: list[str] = Field(default_factory=lambda: ["keep-everything", "paper", "strict", "noise", "expected-value"])
    gate: bool = Field(default=False, description="run the evolve agent's validation gate on every simulated change (a marker file always passes it; ~0.4 s a change)")
    reeval_share: float = Field(default=0.5, ge=0, le=2, description="re-evaluation budget per iteration (noise, expected-value), as a share of one round's trials")
    reeval_ceiling: float = Field(default=2.0, ge=1, le=8, description="expected-value: a round may spend up to this many times reeval_share while a decision is still worth a trial")


def load_scenario(path: Path | None) -> Scenario:
    """The scenario in `path` (YAML), or the default one; one clear sentence when it is wrong."""
    if path is None:
        return Scenario()
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"--scenario {path}: cannot be read ({exc.strerror}); give the path of a YAML scenario file") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--scenario {path}: not valid YAML ({str(exc).splitlines()[0]}); see docs/decisions.md") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--scenario {path}: the file must be a mapping of fields; see docs/decisions.md")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise ConfigError(f"--scenario {path}: field `{where}`: {err['msg']}; see docs/decisions.md for the fields") from None
