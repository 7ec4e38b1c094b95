"""The models file of `ahe transfer`: each model behind its own endpoint, with its own parameters.

```yaml
models:
  - name: gpt-high                 # the table's label (and the model sent, unless `model` is set)
    model: gpt-5.4
    base_url: https://api.example.com/v1
    api_key_env: EXAMPLE_API_KEY   # the variable holding the key; never the key itself
    params: {reasoning_effort: high}
  - name: qwen3-32b
    base_url: http://localhost:8000/v1
```

A top-level list (without `models:`) works too. `params` are sent with every request of that
model and win over the harness's `llm:` block for the same key (temperature, top_p, max_tokens,
reasoning_effort); other keys go into the request body as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ahe.errors import ConfigError
from ahe.llm.types import RoleConfig
from ahe.runtime.config import format_validation_error, read_yaml

RESERVED = ("model", "messages", "tools", "stream")


class ModelEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    timeout_sec: float | None = None
    max_attempts: int | None = Field(default=None, ge=1)

    @field_validator("params")
    @classmethod
    def _no_reserved(cls, v: dict[str, Any]) -> dict[str, Any]:
        bad = [k for k in v if k in RESERVED]
        if bad:
            raise ValueError(f"params may not set {', '.join(bad)} (AHE sends those itself)")
        return v

    def role(self, mock_url: str | None = None) -> RoleConfig:
        """The agent role for this model; a mock URL stands in only where the entry names no endpoint."""
        extra = {k: v for k, v in (("timeout_sec", self.timeout_sec), ("max_attempts", self.max_attempts)) if v is not None}
        return RoleConfig(model=self.model or self.name, base_url=self.base_url or mock_url, api_key_env=self.api_key_env,
                          params=self.params, **extra)


class ModelsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: list[ModelEntry] = Field(min_length=1)


def looks_like_file(value: str) -> bool:
    return value.endswith((".yaml", ".yml")) or Path(value).is_file()


def load_models_file(path: Path) -> list[ModelEntry]:
    """The entries of a models file; a bad one names the file and the key."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--models {path}: no such models file (a YAML list of name, base_url, api_key_env, model, params)")
    data = read_yaml(path)
    if isinstance(data, list):
        data = {"models": data}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a list of models, or a mapping with a `models:` list")
    try:
        entries = ModelsFile.model_validate(data).models
    except ValidationError as err:
        raise ConfigError(format_validation_error(path, err)) from None
    names = [e.name for e in entries]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"{path}: model names must be unique (the table's labels); repeated: {', '.join(dup)}")
    return entries
