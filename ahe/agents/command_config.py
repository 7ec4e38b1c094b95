"""The `command` backend's keys in harness.yaml: how to start a command-line agent in the sandbox.

    backend: command
    command: aider --model openai/{{ model }} --message-file {{ instruction_file }} --yes
    files:                      # harness file or folder -> where the CLI reads it in the sandbox
      AGENTS.md: /app/AGENTS.md
    env:                        # more environment for the CLI (templates; the endpoint ones are set)
      AIDER_EDIT_FORMAT: whole
    config_files:               # sandbox path -> a jinja2 template in the harness, rendered per trial
      /root/.aider.conf.yml: aider.conf.yml.j2
    trajectory: {path: /tmp/messages.json, format: openai}   # none: rebuilt from the gateway's record
    max_requests: 40            # the trial's model budget at the gateway
    components:                 # which file is which component class (defaults from well-known names)
      - {path: AGENTS.md, component: system_prompt}

Templates see: instruction, instruction_file, base_url, api_key (a dummy: the real key stays in
the host's gateway), model, harness_dir, workdir, trajectory_path; `| quote` shell-quotes.
"""

from __future__ import annotations

import fnmatch
import shlex
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import jinja2
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ahe.agents.base import Component, ComponentClass
from ahe.agents.harness_file import HARNESS_FILE, read_harness_file
from ahe.errors import ConfigError
from ahe.llm.types import LLMSettings

HARNESS_DIR = "/tmp/ahe-harness"  # where the whole harness folder is copied in the sandbox
DUMMY_KEY = "sk-ahe-gateway-holds-the-key"
TEMPLATE_VARS = ("instruction", "instruction_file", "base_url", "api_key", "model", "harness_dir", "workdir",
                 "trajectory_path")

# Well-known harness files of CLI agents and the component class an edit to them is.
KNOWN_COMPONENTS: tuple[tuple[str, ComponentClass, str], ...] = (
    ("AGENTS.md", "system_prompt", "the instructions the CLI reads at start"),
    ("CLAUDE.md", "system_prompt", "the instructions the CLI reads at start"),
    ("*.prompt.md", "system_prompt", "a prompt file"),
    ("skills/", "skill", "skills folder"),
    (".claude/skills/", "skill", "skills folder"),
    ("commands/", "skill", "custom slash commands"),
    ("agents/", "sub_agent", "sub-agent definitions"),
    ("hooks/", "middleware", "hook scripts the CLI runs around its steps"),
    ("settings.json", "middleware", "the CLI's settings (hooks, permissions)"),
    (".claude/settings.json", "middleware", "the CLI's settings (hooks, permissions)"),
    ("mcp.json", "tool_implementation", "MCP server list"),
    (".mcp.json", "tool_implementation", "MCP server list"),
    ("tools/", "tool_implementation", "tool programs the CLI calls"),
    ("memory/", "long_term_memory", "notes kept between sessions"),
    ("MEMORY.md", "long_term_memory", "notes kept between sessions"),
)


class TrajectorySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str  # absolute, in the sandbox
    format: Literal["openai", "atif"] = "openai"

    @field_validator("path")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not PurePosixPath(v).is_absolute():
            raise ValueError("must be an absolute path in the sandbox, like /tmp/messages.json")
        return v


class CommandSettings(BaseModel):
    """harness.yaml of a `command` harness (everything but `backend`)."""

    model_config = ConfigDict(extra="forbid")

    command: str = Field(min_length=1)
    workdir: str = "/app"
    files: dict[str, str] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    config_files: dict[str, str] = Field(default_factory=dict)
    trajectory: TrajectorySpec | None = None
    model: str | None = None  # the name the CLI is told (default: the agent role's model)
    max_requests: int = Field(default=50, ge=1)
    llm: LLMSettings | None = None  # when set, the only sampling settings the gateway passes on
    components: list[Component] = Field(default_factory=list)

    @field_validator("files", "config_files")
    @classmethod
    def _places(cls, v: dict[str, str], info: Any) -> dict[str, str]:
        for a, b in v.items():
            target = b if info.field_name == "files" else a
            if not PurePosixPath(target).is_absolute():
                raise ValueError(f"{target!r} must be an absolute path in the sandbox")
        return v


def read_command_settings(harness: Path) -> CommandSettings:
    """The harness's command settings; one sentence naming harness.yaml's field when wrong."""
    path = Path(harness) / HARNESS_FILE
    if not path.is_file():
        raise ConfigError(f"{path}: not found; a command harness names its agent's command there "
                          "(`backend: command` and `command: ...`, docs/backends.md)")
    data = read_harness_file(harness).settings()
    try:
        settings = CommandSettings.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "command"
        raise ConfigError(f"{path}: field {field!r}: {err['msg']}") from None
    for source in list(settings.files) + list(settings.config_files.values()):
        if _outside(harness, source):
            raise ConfigError(f"{path}: {source!r} is not a file or folder inside the harness folder")
    for name, text in [("command", settings.command), *((f"env.{k}", v) for k, v in settings.env.items())]:
        check_template(text, f"{path}: field {name!r}")
    return settings


def _outside(harness: Path, rel: str) -> bool:
    root = Path(harness).resolve()
    target = (root / rel).resolve()
    return not (target == root or root in target.parents) or not target.exists()


def _env() -> jinja2.Environment:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters["quote"] = lambda v: shlex.quote(str(v))
    return env


def check_template(text: str, where: str) -> None:
    try:
        render(text, {k: "x" for k in TEMPLATE_VARS})
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def render(text: str, values: dict[str, Any]) -> str:
    try:
        return _env().from_string(text).render(**values)
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"{exc.message}; a template may use {', '.join(TEMPLATE_VARS)}") from None
    except jinja2.TemplateError as exc:
        raise ConfigError(f"not a valid template ({exc})") from None


def command_components(harness: Path) -> list[Component]:
    """harness.yaml's own map, then the well-known files present that it does not name."""
    harness = Path(harness)
    out = [Component(path=HARNESS_FILE, component="middleware",
                     note="the command, where the files go, the endpoint wiring and the budget")]
    try:
        settings = read_command_settings(harness)
    except ConfigError:  # the load check reports it
        return out
    out += settings.components
    named = {c.path.rstrip("/") for c in out}
    for pattern, cls, note in KNOWN_COMPONENTS:
        for hit in _matches(harness, pattern):
            if hit.rstrip("/") not in named:
                out.append(Component(path=hit, component=cls, note=note))
                named.add(hit.rstrip("/"))
    for target, template in settings.config_files.items():
        if template not in named:
            out.append(Component(path=template, component="middleware", note=f"rendered to {target}"))
            named.add(template)
    return out


def _matches(harness: Path, pattern: str) -> list[str]:
    if pattern.endswith("/"):
        return [pattern] if (harness / pattern).is_dir() else []
    if "*" not in pattern:
        return [pattern] if (harness / pattern).is_file() else []
    return sorted(p.name for p in harness.iterdir() if p.is_file() and fnmatch.fnmatch(p.name, pattern))
