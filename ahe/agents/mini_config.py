"""A mini-swe-agent harness read as data: which config file, its sections, their component classes.

    harness.yaml:   backend: mini-swe-agent
                    config: mini.yaml          # default; a path inside the harness folder

Read both on the host (the component map, the gateway's budget) and in the jail (before mini's
own classes validate it, mini_session.py). Nothing here imports mini-swe-agent or the harness's
code: a custom agent or environment class is only named here, imported in the jail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ahe.agents.base import Component
from ahe.agents.harness_file import HARNESS_FILE, read_harness_file
from ahe.errors import ConfigError

DEFAULT_CONFIG = "mini.yaml"
SECTIONS = ("agent", "environment", "model", "run")
# mini's own names for its classes (minisweagent/{agents,environments,models}/__init__.py). Any
# environment of these runs in the trial's sandbox instead; a dotted name is the harness's own class.
BUILTIN_AGENTS = {"default", "interactive"}
BUILTIN_ENVIRONMENTS = {"local", "docker", "singularity", "bubblewrap", "swerex_docker", "swerex_modal", "contree"}
TOOLCALL_MODELS = {"", "litellm", "openrouter", "portkey", "requesty", "litellm_response", "openrouter_response",
                   "portkey_response"}
TEXT_MODELS = {"litellm_textbased", "openrouter_textbased"}
# the environment settings that mean something in the trial's sandbox (others, e.g. docker's image, do not)
SANDBOX_ENV_KEYS = ("cwd", "env", "timeout")


def config_name(harness: Path) -> str:
    """The config file named by harness.yaml (`config:`), relative to the harness folder."""
    settings = read_harness_file(harness).settings()
    name = settings.get("config", DEFAULT_CONFIG)
    where = Path(harness) / HARNESS_FILE
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: field 'config' must name mini-swe-agent's config file, e.g. `config: mini.yaml`")
    if Path(name).is_absolute() or ".." in Path(name).parts:
        raise ConfigError(f"{where}: field 'config' must be a path inside the harness folder, not {name!r}")
    return name


def read_config(harness: Path, name: str | None = None) -> dict[str, Any]:
    """mini's config as data; one sentence naming the file when it is missing or malformed."""
    name = name or config_name(harness)
    path = Path(harness) / name
    if not path.is_file():
        raise ConfigError(f"{path}: not found — the mini-swe-agent config (harness.yaml's config key, default "
                          f"mini.yaml); copy one from mini's package, e.g. minisweagent/config/mini.yaml")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{path}: not readable YAML ({first}); fix it") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a mapping with agent/environment/model sections, "
                          f"not {type(data).__name__}")
    for section in SECTIONS:
        if data.get(section) is not None and not isinstance(data[section], dict):
            raise ConfigError(f"{path}: field {section!r} must be a mapping, not {type(data[section]).__name__}")
    if not isinstance(data.get("agent"), dict):
        raise ConfigError(f"{path}: field 'agent' is missing — mini-swe-agent needs agent.system_template "
                          "and agent.instance_template")
    model_class = str((data.get("model") or {}).get("model_class") or "")
    if model_class not in TOOLCALL_MODELS | TEXT_MODELS:
        raise ConfigError(f"{path}: field 'model.model_class' is {model_class!r}; under AHE the model is reached "
                          f"through its gateway, so use one of mini's own: {', '.join(sorted(TOOLCALL_MODELS - {''} | TEXT_MODELS))}")
    return data


def section(data: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(data.get(name) or {})


def class_file(dotted: str) -> str:
    """The harness file of a custom class `pkg.mod.Class` (the module's .py, as the jail imports it)."""
    module = dotted.rsplit(".", 1)[0]
    return module.replace(".", "/") + ".py"


def mini_components(harness: Path) -> list[Component]:
    """Which part of a mini harness is which component class (docs/backends.md says why)."""
    out = [Component(path=HARNESS_FILE, component="middleware",
                     note="names the backend and mini's config file (the backend is fixed for a run)")]
    try:
        name = config_name(harness)
        data = read_config(harness, name)
    except ConfigError:  # the load check reports it
        return out
    agent, env, model = section(data, "agent"), section(data, "environment"), section(data, "model")
    cls = [("system_template", "system_prompt", "the system message"),
           ("instance_template", "system_prompt", "the first user message: the task, the workflow, the command rules")]
    out += [Component(path=name, component=c, note=f"agent.{k}: {why}") for k, c, why in cls if k in agent]
    limits = [k for k in ("step_limit", "cost_limit", "wall_time_limit_seconds", "max_consecutive_format_errors")
              if k in agent]
    if limits:
        out.append(Component(path=name, component="middleware", note="agent limits: " + ", ".join(limits)))
    if "format_error_template" in model:
        out.append(Component(path=name, component="middleware",
                             note="model.format_error_template: the note sent back for a malformed reply"))
    for k in ("observation_template", "action_regex"):
        if k in model:
            out.append(Component(path=name, component="tool_implementation", note=f"model.{k}: the bash tool's "
                                 + ("result as the model reads it" if k == "observation_template" else "action format")))
    if any(k in env for k in SANDBOX_ENV_KEYS):
        out.append(Component(path=name, component="tool_implementation",
                             note="environment: cwd, env, timeout of every command"))
    agent_class = str(agent.get("agent_class") or "default")
    if agent_class not in BUILTIN_AGENTS:
        out.append(Component(path=class_file(agent_class), component="middleware", note=f"agent class {agent_class}"))
    env_class = str(env.get("environment_class") or "local")
    if env_class not in BUILTIN_ENVIRONMENTS:
        out.append(Component(path=class_file(env_class), component="tool_implementation",
                             note=f"environment class {env_class}"))
    return out
