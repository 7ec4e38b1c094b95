"""The agent-backend registry: a backend's name → how to make it (same style as ahe.sandbox.registry).

    from ahe.agents.registry import register_agent_backend
    register_agent_backend("mine", MyBackend)      # a class or any zero-argument factory

Backends outside AHE register from a plugin module (AHE_PLUGINS or the `ahe.plugins` entry-point
group, ahe/plugins.py). The built-in ones register on first use of the registry.
"""

from __future__ import annotations

from collections.abc import Callable

from ahe.agents.base import AgentBackend
from ahe.errors import AheError

_FACTORIES: dict[str, Callable[[], AgentBackend]] = {}
_SUMMARIES: dict[str, str] = {}
_loaded = False


def register_agent_backend(name: str, factory: Callable[[], AgentBackend], summary: str = "") -> None:
    """Add (or replace) a backend; `factory()` makes one instance per executor."""
    _FACTORIES[name] = factory
    _SUMMARIES[name] = summary or getattr(factory, "summary", "") or ""


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
    return sorted(_FACTORIES)


def agent_backend_summaries() -> dict[str, str]:
    _load()
    return {name: _SUMMARIES[name] for name in sorted(_FACTORIES)}


def check_agent_backend(name: str, where: str = "--agent-backend") -> str:
    """`name` when it is registered; else one sentence naming `where` and the backends that exist."""
    _load()
    if name not in _FACTORIES:
        raise AheError(f"{where}: no agent backend {name!r}; use one of: {', '.join(sorted(_FACTORIES))} "
                       "(a plugin named by AHE_PLUGINS can register more)")
    return name


def make_agent_backend(name: str, where: str = "--agent-backend") -> AgentBackend:
    """A new instance of the backend called `name` (one sentence when there is none)."""
    check_agent_backend(name, where)
    return _FACTORIES[name]()
