"""What a sandbox backend is and the table backends register into: a leaf the built-in backends
(ahe/sandbox/builtin_backends.py) and plugins import, so the registry's lookup (registry.py), which
loads them, is never imported back by them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ahe.sandbox.base import Sandbox

TaskKind = Literal["local", "docker"]


class SandboxRequest(BaseModel):
    """Everything a backend needs to make the sandbox of one trial (built by ahe.tasks)."""

    task_name: str
    kind: TaskKind  # the task's environment: its own files ("local") or an image ("docker")
    workdir: Path  # a fresh host folder that belongs to this one sandbox
    app_dir: Path  # host folder holding /app's starting files (empty for image tasks)
    environment_dir: Path | None = None  # build context when the task has a Dockerfile
    docker_image: str | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    network: bool = False
    env: dict[str, str] = Field(default_factory=dict)
    build_timeout_sec: float | None = 600.0
    # A prepared test environment (virtualenv) the local sandbox mounts read-only at /opt/ahe-env.
    test_env: Path | None = None
    # Folders the verifier and the oracle fill at run time (empty and trial-private before).
    stage_dirs: tuple[str, ...] = ("/tests", "/solution")


class BackendOptions(BaseModel):
    """Run-wide settings of a backend (from the config or the command line)."""

    isolation: Literal["auto", "bwrap", "none"] = "auto"
    default_image: str | None = None  # docker: the image local tasks run on
    client: Any = None  # docker: an existing client (tests)


MakeSandbox = Callable[[SandboxRequest, BackendOptions], "Sandbox | Awaitable[Sandbox]"]


@dataclass(frozen=True)
class SandboxBackend:
    name: str
    summary: str
    kinds: tuple[TaskKind, ...]  # which task environments it runs
    make: MakeSandbox
    prepare: Callable[[BackendOptions], None] | None = None  # run once per run: fail fast


BACKENDS: dict[str, SandboxBackend] = {}


def register_backend(backend: SandboxBackend) -> SandboxBackend:
    """Add (or replace) a backend; returns it so a module can keep a handle."""
    BACKENDS[backend.name] = backend
    return backend
