"""`harness.yaml`: the small file in a harness folder that names the agent backend running it.

    backend: mini-swe-agent      # default `ahe` (AHE's own runtime, agent.yaml)
    config: mini.yaml            # any further keys are the backend's own settings

A folder without harness.yaml is an `ahe` harness. The file is part of the harness and under
the same git history, so a run's backend cannot change between iterations unnoticed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from ahe.errors import ConfigError

HARNESS_FILE = "harness.yaml"
DEFAULT_BACKEND = "ahe"


class HarnessFile(BaseModel):
    model_config = ConfigDict(extra="allow")  # the backend validates its own keys

    backend: str = DEFAULT_BACKEND

    def settings(self) -> dict[str, Any]:
        """The backend's own keys (everything but `backend`)."""
        return dict(self.model_extra or {})


def read_harness_file(harness: Path) -> HarnessFile:
    """The folder's harness.yaml (defaults when absent); one sentence naming the file when malformed."""
    path = Path(harness) / HARNESS_FILE
    if not path.is_file():
        return HarnessFile()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not readable YAML ({str(exc).splitlines()[0]}); fix it or remove it") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a mapping like `backend: ahe`, not {type(data).__name__}")
    try:
        return HarnessFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "backend"
        raise ConfigError(f"{path}: field {field!r}: {err['msg']}") from None
