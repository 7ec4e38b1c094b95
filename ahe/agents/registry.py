"""The agent-backend registry: a backend's name → how to make it (same style as ahe.sandbox.registry).

    from ahe.agents.registry import register_agent_backend
    register_agent_backend("mine", MyBackend)      # a class or any zero-argument factory

Backends outside AHE register from a plugin module (AHE_PLUGINS or the `ahe.plugins` entry-point
group, ahe/plugins.py). The built-in ones register on first use of the registry (this module
imports them, ahe/agents/builtin.py; none of them imports it back).
"""

from __future__ import annotations

from pathlib import Path

from ahe.agents.base import AgentBackend
from ahe.agents.harness_file import DEFAULT_BACKEND, HARNESS_FILE, read_harness_file
from ahe.agents.registrations import FACTORIES, SUMMARIES, register_agent_backend
from ahe.errors import AheError, ConfigError

__all__ = ["agent_backend_names", "agent_backend_summaries", "backend_name", "check_agent_backend",
           "make_agent_backend", "register_agent_backend"]
_loaded = False


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from ahe.agents import builtin  # noqa: F401 - registers ahe and the third-party backends
    from ahe.plugins import load_plugins

    load_plugins()


def agent_backend_names() -> list[str]:
    _load()
    return sorted(FACTORIES)


def agent_backend_summaries() -> dict[str, str]:
    _load()
    return {name: SUMMARIES[name] for name in sorted(FACTORIES)}


def check_agent_backend(name: str, where: str = "--agent-backend") -> str:
    """`name` when it is registered; else one sentence naming `where` and the backends that exist."""
    _load()
    if name not in FACTORIES:
        raise AheError(f"{where}: no agent backend {name!r}; use one of: {', '.join(sorted(FACTORIES))} "
                       "(a plugin named by AHE_PLUGINS can register more)")
    return name


def make_agent_backend(name: str, where: str = "--agent-backend") -> AgentBackend:
    """A new instance of the backend called `name` (one sentence when there is none)."""
    check_agent_backend(name, where)
    return FACTORIES[name]()


def backend_name(harness: Path, override: str | None = None) -> str:
    """The backend of the harness at `harness`: harness.yaml's, or `override` (--agent-backend).

    The two must agree when both are given: running a folder written for one agent with another
    would evaluate something the user did not ask for.
    """
    path = Path(harness) / HARNESS_FILE
    declared = read_harness_file(harness).backend if path.is_file() else None
    if override and declared and override != declared:
        raise ConfigError(f"{path} names backend {declared!r} but --agent-backend says {override!r}; "
                          "drop the flag or change the file")
    name = override or declared or DEFAULT_BACKEND
    return check_agent_backend(name, f"{path}: backend" if declared else "--agent-backend")
