"""Agent backends (docs/backends.md): which agent runs a trial's session, behind one seam.

    from ahe.agents import AgentRequest, harness_backend
    backend = harness_backend(harness_folder)          # from its harness.yaml (default `ahe`)
    result = await backend.run(AgentRequest(...))
"""

from __future__ import annotations

from pathlib import Path

from ahe.agents.base import AgentBackend, AgentRequest, BackendBase, Component, ComponentClass
from ahe.agents.harness_file import HARNESS_FILE, read_harness_file
from ahe.agents.registry import agent_backend_names, backend_name, make_agent_backend, register_agent_backend


def harness_backend(harness: Path, override: str | None = None) -> AgentBackend:
    """A new instance of the backend that runs the harness at `harness`."""
    return make_agent_backend(backend_name(harness, override))


__all__ = ["AgentBackend", "AgentRequest", "BackendBase", "Component", "ComponentClass", "HARNESS_FILE",
           "agent_backend_names", "backend_name", "harness_backend", "make_agent_backend", "read_harness_file",
           "register_agent_backend"]
