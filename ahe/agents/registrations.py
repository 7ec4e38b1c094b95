"""The table agent backends register into: a leaf the built-in backends (ahe/agents/builtin.py) and
plugins import, so the registry's lookup (ahe/agents/registry.py), which loads them, is never
imported back by them."""

from __future__ import annotations

from collections.abc import Callable

from ahe.agents.base import AgentBackend

FACTORIES: dict[str, Callable[[], AgentBackend]] = {}
SUMMARIES: dict[str, str] = {}


def register_agent_backend(name: str, factory: Callable[[], AgentBackend], summary: str = "") -> None:
    """Add (or replace) a backend; `factory()` makes one instance per executor."""
    FACTORIES[name] = factory
    SUMMARIES[name] = summary or getattr(factory, "summary", "") or ""
