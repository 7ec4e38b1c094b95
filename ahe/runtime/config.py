"""agent.yaml: the registry of a harness workspace, validated by pydantic.

Unknown keys and wrong types are errors that name the file and the key, so a typo in a
harness never silently changes what the agent runs with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ahe.errors import ConfigError
from ahe.llm.types import LLMSettings


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolEntry(_Strict):
    """A tool: the YAML the model sees (`description`) and the function that runs (`binding`)."""

    name: str
    description: str  # path of tool_descriptions/<name>.tool.yaml, relative to the workspace
    binding: str  # "tools.<module>:<function>"

    @field_validator("binding")
    @classmethod
    def _binding_shape(cls, v: str) -> str:
        _split_binding(v)
        return v


class MiddlewareEntry(_Strict):
    binding: str  # "middleware.<module>:<Class>"
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("binding")
    @classmethod
    def _binding_shape(cls, v: str) -> str:
        _split_binding(v)
        return v


class SubAgentEntry(_Strict):
    name: str
    config: str  # path of sub_agents/<name>/agent.yaml, relative to the workspace
    description: str | None = None


class AgentConfig(_Strict):
    name: str = "agent"
    description: str | None = None
    system_prompt: str = "systemprompt.md"
    memory: str | None = "LongTermMEMORY.md"
    max_turns: int = Field(default=100, ge=1)
    max_context_tokens: int = Field(default=200_000, ge=1000)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    tools: list[ToolEntry] = Field(default_factory=list)
    middleware: list[MiddlewareEntry] = Field(default_factory=list)
    skills: list[str] = Field(default_factory=list)
    sub_agents: list[SubAgentEntry] = Field(default_factory=list)
    stop_tools: list[str] = Field(default_factory=list)


def _split_binding(binding: str) -> tuple[str, str]:
    module, sep, attr = binding.partition(":")
    if not sep or not module or not attr or not attr.isidentifier():
        raise ValueError(
            f"binding {binding!r} must look like 'tools.<module>:<function>' or 'middleware.<module>:<Class>'"
        )
    if not all(part.isidentifier() for part in module.split(".")):
        raise ValueError(f"binding {binding!r} has an invalid module path {module!r}")
    return module, attr


def split_binding(binding: str) -> tuple[str, str]:
    """('tools.shell', 'run_shell_command') from 'tools.shell:run_shell_command'."""
    return _split_binding(binding)


def format_validation_error(path: Path, err: ValidationError) -> str:
    """One sentence per problem, naming the file and the dotted key."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            parts.append(f"{path}: unknown key '{loc}' — remove it or fix its spelling")
        elif e["type"] == "missing":
            parts.append(f"{path}: missing required key '{loc}'")
        elif e["type"] == "value_error" and not e["loc"]:  # a check across keys: its own sentence names them
            parts.append(f"{path}: {e['msg'].removeprefix('Value error, ')}")
        else:
            parts.append(f"{path}: key '{loc}': {e['msg']} (got {e.get('input')!r})")
    return "; ".join(parts)


def read_yaml(path: Path) -> Any:
    """Parse a YAML file; a syntax error names the file and the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}") from None


def load_agent_config(path: Path) -> AgentConfig:
    data = read_yaml(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a mapping of keys (name, tools, ...), got {type(data).__name__}")
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(path, err)) from None
