"""Loading a harness workspace: config, prompt, memory, tools, middleware, skills, sub-agents.

The same loader serves the code agent under evolution, the debugger agent and the evolve
agent: one runtime, three agents. Everything is checked at load time, so a broken workspace
fails before any model call with a message naming the file.
"""

from __future__ import annotations

import getpass
import inspect
import platform
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import jinja2
import yaml

from ahe.errors import ConfigError
from ahe.runtime.builtins import add_builtin_tools
from ahe.runtime.config import AgentConfig, SubAgentEntry, load_agent_config
from ahe.runtime.imports import resolve_binding
from ahe.runtime.middleware import Middleware
from ahe.runtime.tools import Tool, load_tool_description

MEMORY_HEADING = "# Long-term memory"


@dataclass
class Skill:
    name: str
    description: str
    body: str
    path: Path


@dataclass
class LoadedAgent:
    """A workspace ready to run sessions. Middleware instances are created per session."""

    root: Path  # folder of this agent's agent.yaml
    code_root: Path  # workspace whose tools/ and middleware/ hold the code
    config: AgentConfig
    prompt_path: Path
    prompt_template: jinja2.Template
    memory: str
    tools: dict[str, Tool]
    middleware_classes: list[tuple[type[Middleware], dict[str, Any]]]
    skills: dict[str, Skill]
    sub_agents: dict[str, SubAgentEntry] = field(default_factory=dict)
    _sub_cache: dict[str, "LoadedAgent"] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.config.name

    def make_middleware(self) -> list[Middleware]:
        out = []
        for cls, params in self.middleware_classes:
            try:
                out.append(cls(**params))
            except Exception as exc:
                raise ConfigError(
                    f"{self.root / 'agent.yaml'}: middleware {cls.__name__} could not be created with params {params!r}: {exc}"
                ) from None
        return out

    def render_system_prompt(self, *, working_directory: str, extra: dict[str, Any] | None = None) -> str:
        variables = {
            "date": date.today().isoformat(),
            "working_directory": working_directory,
            "username": _username(),
            "os": f"{platform.system()} {platform.release()}",
            "tools": [{"name": t.name, "description": t.description.description} for t in self.tools.values()],
            "skills": [{"name": s.name, "description": s.description} for s in self.skills.values()],
            "agent_name": self.config.name,
            **(extra or {}),
        }
        try:
            text = self.prompt_template.render(**variables)
        except jinja2.UndefinedError as exc:
            raise ConfigError(
                f"{self.prompt_path}: {exc.message} — available variables: {', '.join(sorted(variables))}"
            ) from None
        if self.memory.strip():
            text = f"{text.rstrip()}\n\n{MEMORY_HEADING}\n\n{self.memory.strip()}\n"
        return text

    def sub_agent(self, name: str) -> "LoadedAgent":
        if name not in self.sub_agents:
            raise KeyError(name)
        if name not in self._sub_cache:
            entry = self.sub_agents[name]
            cfg_path = (self.root / entry.config).resolve()
            self._sub_cache[name] = load_agent(cfg_path.parent, config_file=cfg_path.name, code_root=self.code_root)
        return self._sub_cache[name]


def _username() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "user"


def _find(path: str, *roots: Path) -> Path:
    for r in roots:
        candidate = (r / path).resolve()
        if candidate.exists():
            return candidate
    return (roots[0] / path).resolve()


def load_skill(folder: Path) -> Skill:
    skill_file = folder / "SKILL.md"
    if not skill_file.is_file():
        raise ConfigError(f"{skill_file}: missing — a skill is a folder with a SKILL.md")
    text = skill_file.read_text(encoding="utf-8")
    if not text.startswith("---"):
        raise ConfigError(f"{skill_file}: must start with YAML front matter (---, name, description, ---)")
    try:
        _, front, body = text.split("---", 2)
        meta = yaml.safe_load(front) or {}
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{skill_file}: invalid front matter: {exc}") from None
    if not isinstance(meta, dict) or not meta.get("name") or not meta.get("description"):
        raise ConfigError(f"{skill_file}: front matter needs 'name' and 'description'")
    return Skill(name=str(meta["name"]), description=str(meta["description"]).strip(), body=body.strip(), path=skill_file)


def load_agent(root: Path, *, config_file: str = "agent.yaml", code_root: Path | None = None) -> LoadedAgent:
    """Load the agent whose agent.yaml is `root/config_file`. Raises ConfigError naming the file."""
    root = Path(root).resolve()
    code_root = (code_root or root).resolve()
    cfg_path = root / config_file
    if not cfg_path.is_file():
        raise ConfigError(f"{cfg_path}: not found — is {root} a harness workspace (a folder with agent.yaml)?")
    config = load_agent_config(cfg_path)

    prompt_path = _find(config.system_prompt, root, code_root)
    if not prompt_path.is_file():
        raise ConfigError(f"{cfg_path}: system_prompt {config.system_prompt!r} not found at {prompt_path}")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    try:
        template = env.from_string(prompt_path.read_text(encoding="utf-8"))
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"{prompt_path}: template syntax error at line {exc.lineno}: {exc.message}") from None

    memory = ""
    if config.memory:
        mem_path = _find(config.memory, root, code_root)
        if mem_path.is_file():
            memory = mem_path.read_text(encoding="utf-8")

    tools: dict[str, Tool] = {}
    for entry in config.tools:
        if entry.name in tools:
            raise ConfigError(f"{cfg_path}: tool {entry.name!r} is registered twice")
        desc_path = _find(entry.description, root, code_root)
        if not desc_path.is_file():
            raise ConfigError(f"{cfg_path}: tool {entry.name!r}: description file {entry.description!r} not found")
        desc = load_tool_description(desc_path, expected_name=entry.name)
        fn = resolve_binding(code_root, entry.binding, kind="tool")
        if not callable(fn):
            raise ConfigError(f"{cfg_path}: tool binding {entry.binding!r} is not a function")
        tools[entry.name] = Tool(description=desc, function=fn, source=entry.binding)

    middleware_classes = []
    for entry in config.middleware:
        cls = resolve_binding(code_root, entry.binding, kind="middleware")
        if not (inspect.isclass(cls) and issubclass(cls, Middleware)):
            raise ConfigError(
                f"{cfg_path}: middleware binding {entry.binding!r} must be a class derived from ahe.runtime.Middleware"
            )
        middleware_classes.append((cls, entry.params))

    skills: dict[str, Skill] = {}
    for rel in config.skills:
        skill = load_skill(_find(rel, root, code_root))
        skills[skill.name] = skill

    sub_agents: dict[str, SubAgentEntry] = {}
    for entry in config.sub_agents:
        sub_path = _find(entry.config, root, code_root)
        if not sub_path.is_file():
            raise ConfigError(f"{cfg_path}: sub-agent {entry.name!r}: config {entry.config!r} not found")
        sub_agents[entry.name] = entry.model_copy(update={"config": str(sub_path)})

    agent = LoadedAgent(
        root=root,
        code_root=code_root,
        config=config,
        prompt_path=prompt_path,
        prompt_template=template,
        memory=memory,
        tools=tools,
        middleware_classes=middleware_classes,
        skills=skills,
        sub_agents=sub_agents,
    )
    # Load sub-agents now so a broken one fails at load time, not mid-session.
    for name in sub_agents:
        agent.sub_agent(name)
    add_builtin_tools(agent)
    agent.make_middleware()  # constructor errors surface at load time
    return agent
