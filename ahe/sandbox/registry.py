"""The sandbox registry: one place that maps a backend name to how it makes sandboxes.

A backend is a name, a one-line summary, the task environments it can run (`kinds`: a
"local" task ships its files in environment/, a "docker" task needs an image), and a
function that turns a `SandboxRequest` (what the tasks layer knows about one trial's
sandbox) into an unstarted `Sandbox`. The rollout, tasks, transfer and config layers ask
this registry; nothing else names backends.

Adding a backend is one module plus one registration::

    from ahe.sandbox.registry import SandboxBackend, register_backend  # (defined in ahe/sandbox/backend_types.py)
    register_backend(SandboxBackend(name="mine", summary="...", kinds=("local",), make=make_mine))

Backends outside AHE register from a module named in the `AHE_PLUGINS` environment variable
(comma-separated module names, imported on first use of the registry) or from the
`ahe.plugins` entry-point group of an installed package.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

from ahe.errors import AheError
from ahe.sandbox.backend_types import (BACKENDS, BackendOptions, MakeSandbox, SandboxBackend, SandboxRequest, TaskKind,
                                       register_backend)

__all__ = ["BackendOptions", "MakeSandbox", "SandboxBackend", "SandboxName", "SandboxRequest", "TaskKind",
           "backend_names", "get_backend", "register_backend"]
_plugins_loaded = False


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
    return sorted(BACKENDS)


def get_backend(name: str) -> SandboxBackend:
    """The backend called `name`, or one sentence listing the ones that exist."""
    _load_plugins()
    backend = BACKENDS.get(name)
    if backend is None:
        raise AheError(f"--sandbox {name!r}: no such sandbox backend; use one of: {', '.join(sorted(BACKENDS))}")
    return backend


def _check_name(name: str) -> str:
    try:
        get_backend(name)
    except AheError as exc:
        raise ValueError(str(exc)) from None  # pydantic reports it with the field's name
    return name


SandboxName = Annotated[str, AfterValidator(_check_name)]
"""A config/spec field holding a registered backend name (validated against the registry)."""
