"""The task model: one Harbor / Terminal-Bench 2 task folder, validated (DESIGN.md §6).

A task folder looks like::

    task/
      task.toml           configuration (see `docs/task-format.md` for every key)
      instruction.md      what the agent is told
      environment/        Dockerfile and build context, or (local tasks) files copied to /app
                          plus an optional setup.sh run before the agent starts
      tests/test.sh       the verifier; copied in only after the agent has finished
      solution/solve.sh   the reference solution, used only by the oracle

`ahe.tasks.loader.load_task` builds a `Task` from such a folder; this module only holds the
shapes and the derived facts (paths, `runs_on`, resource limits).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

# Defaults when task.toml says nothing. The verifier default is harbor's; the agent default
# is what every Terminal-Bench 2 task declares.
DEFAULT_AGENT_TIMEOUT_SEC = 900.0
DEFAULT_VERIFIER_TIMEOUT_SEC = 600.0
DEFAULT_BUILD_TIMEOUT_SEC = 600.0

# Files in environment/ that describe how to build the machine rather than what is in /app.
DOCKERFILE_NAME = "Dockerfile"
COMPOSE_NAMES = ("docker-compose.yaml", "docker-compose.yml")
SETUP_SCRIPT_NAME = "setup.sh"

# Values of [environment] network_mode that switch the network on / off. Harbor uses
# "public" / "no-network" / "allowlist"; docker's own names are accepted too.
NETWORK_ON = frozenset({"public", "allowlist", "bridge", "host", "online"})
NETWORK_OFF = frozenset({"no-network", "none", "off", "offline", "disabled"})


class EnvironmentSpec(BaseModel):
    """The machine a task runs on: [environment] of task.toml plus what environment/ holds."""

    model_config = ConfigDict(frozen=True)

    docker_image: str | None = None
    dockerfile: Path | None = Field(
        default=None, description="environment/Dockerfile when the folder has one"
    )
    compose_file: Path | None = Field(
        default=None, description="environment/docker-compose.yaml when the folder has one"
    )
    setup_script: Path | None = Field(
        default=None, description="environment/setup.sh (run before the agent on local tasks)"
    )
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    gpus: int | None = None
    build_timeout_sec: float = DEFAULT_BUILD_TIMEOUT_SEC
    network_mode: str | None = None
    allow_internet: bool | None = None
    env: dict[str, str] = Field(default_factory=dict)
    test_env: Path | None = Field(
        default=None, description="a prepared virtualenv mounted read-only at /opt/ahe-env (local tasks)"
    )

    @property
    def wants_network(self) -> bool:
        """True only when the task asks for network explicitly; AHE defaults to none."""
        if self.network_mode is not None:
            return self.network_mode.lower() in NETWORK_ON
        return bool(self.allow_internet)


class Task(BaseModel):
    """One task folder, loaded and checked. Build it with `ahe.tasks.load_task`."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="[task] name without its 'org/' prefix, or the folder name")
    path: Path = Field(description="absolute path of the task folder")
    instruction: str
    full_name: str | None = Field(
        default=None, description="[task] name as written, e.g. 'terminal-bench/fix-git'"
    )
    description: str | None = None
    schema_version: str | None = Field(default=None, description="'version' or 'schema_version'")
    difficulty: str | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="the whole [metadata] table, unknown keys included"
    )
    agent_timeout_sec: float = DEFAULT_AGENT_TIMEOUT_SEC
    verifier_timeout_sec: float = DEFAULT_VERIFIER_TIMEOUT_SEC
    verifier_env: dict[str, str] = Field(default_factory=dict)
    solution_env: dict[str, str] = Field(default_factory=dict)
    environment: EnvironmentSpec = Field(default_factory=EnvironmentSpec)

    # ---- derived facts -------------------------------------------------------------------

    @computed_field  # type: ignore[prop-decorator]
    @property
    def runs_on(self) -> Literal["local", "docker"]:
        """"local" when there is neither a docker_image nor a Dockerfile (or compose file).

        A docker task needs its image and cannot run in the local sandbox; a local task can
        run in docker given a default image.
        """
        env = self.environment
        if env.docker_image or env.dockerfile or env.compose_file:
            return "docker"
        return "local"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def has_solution(self) -> bool:
        return self.solve_script.is_file()

    @property
    def has_setup(self) -> bool:
        """A setup.sh to run before the agent (local tasks only; docker tasks build instead)."""
        return self.runs_on == "local" and self.environment.setup_script is not None

    @property
    def task_toml(self) -> Path:
        return self.path / "task.toml"

    @property
    def instruction_path(self) -> Path:
        return self.path / "instruction.md"

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def test_script(self) -> Path:
        return self.tests_dir / "test.sh"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    @property
    def solve_script(self) -> Path:
        return self.solution_dir / "solve.sh"

    def summary(self) -> dict[str, Any]:
        """A flat, JSON-ready description (what `ahe tasks list --json` prints)."""
        env = self.environment
        return {
            "name": self.name,
            "path": str(self.path),
            "runs_on": self.runs_on,
            "difficulty": self.difficulty,
            "category": self.category,
            "tags": list(self.tags),
            "agent_timeout_sec": self.agent_timeout_sec,
            "verifier_timeout_sec": self.verifier_timeout_sec,
            "docker_image": env.docker_image,
            "dockerfile": str(env.dockerfile) if env.dockerfile else None,
            "has_setup": self.has_setup,
            "has_solution": self.has_solution,
            "cpus": env.cpus,
            "memory_mb": env.memory_mb,
            "network": env.wants_network,
        }
