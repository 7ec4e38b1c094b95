"""The sandbox registry: one place that maps a backend name to how it makes sandboxes.

A backend is a name, a one-line summary, the task environments it can run (`kinds`: a
"local" task ships its files in environment/, a "docker" task needs an image), and a
function that turns a `SandboxRequest` (what the tasks layer knows about one trial's
sandbox) into an unstarted `Sandbox`. The rollout, tasks, transfer and config layers ask
this registry; nothing else names backends.

Adding a backend is one module plus one registration::

    from ahe.sandbox.registry import SandboxBackend, register_backend
    register_backend(SandboxBackend(name="mine", summary="...", kinds=("local",), make=make_mine))

Backends outside AHE register from a module named in the `AHE_PLUGINS` environment variable
(comma-separated module names, imported on first use of the registry) or from the
`ahe.plugins` entry-point group of an installed package.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field

from ahe.errors import AheError
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


_BACKENDS: dict[str, SandboxBackend] = {}
_plugins_loaded = False


def register_backend(backend: SandboxBackend) -> SandboxBackend:
    """Add (or replace) a backend; returns it so a module can keep a handle."""
    _BACKENDS[backend.name] = backend
    return backend


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from ahe.plugins import load_plugins
    from ahe.sandbox import builtin_backends  # noqa: F401 - registers local and docker

    load_plugins()


def backend_names() -> list[str]:
    _load_plugins()
    return sorted(_BACKENDS)


def get_backend(name: str) -> SandboxBackend:
    """The backend called `name`, or one sentence listing the ones that exist."""
    _load_plugins()
    backend = _BACKENDS.get(name)
    if backend is None:
        raise AheError(f"--sandbox {name!r}: no such sandbox backend; use one of: {', '.join(sorted(_BACKENDS))}")
    return backend


def _check_name(name: str) -> str:
    try:
        get_backend(name)
    except AheError as exc:
        raise ValueError(str(exc)) from None  # pydantic reports it with the field's name
    return name


SandboxName = Annotated[str, AfterValidator(_check_name)]
"""A config/spec field holding a registered backend name (validated against the registry)."""
