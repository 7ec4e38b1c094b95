"""From a task to its sandbox: the tasks layer's side of the sandbox registry.

A `SandboxFactory` gets the task and a fresh, empty host folder that belongs to this one
sandbox, and returns an *unstarted* sandbox (or an awaitable of one). The factory prepares
/app from the task (`prepare_app_dir`) and asks the chosen backend (`ahe.sandbox.registry`)
for the sandbox, so a new backend needs no change here.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from ahe.sandbox.base import Sandbox
from ahe.sandbox.registry import BackendOptions, SandboxRequest, get_backend
from ahe.tasks.model import Task
from ahe.tasks.phases import SOLUTION_DIR, TESTS_DIR, prepare_app_dir

SandboxFactory = Callable[[Task, Path], "Sandbox | Awaitable[Sandbox]"]


def sandbox_request(task: Task, workdir: Path) -> SandboxRequest:
    """What a backend needs to know about one trial of `task`; fills `<workdir>/app`."""
    from ahe.tasks.loader import resolve_env

    env = task.environment
    return SandboxRequest(
        task_name=task.name,
        kind=task.runs_on,
        workdir=Path(workdir),
        app_dir=prepare_app_dir(task, Path(workdir) / "app"),
        environment_dir=task.environment_dir if env.dockerfile else None,
        docker_image=env.docker_image,
        cpus=env.cpus,
        memory_mb=env.memory_mb,
        network=env.wants_network,
        env=resolve_env(env.env, where=f"{task.task_toml}: [environment] env"),
        build_timeout_sec=env.build_timeout_sec,
        stage_dirs=(TESTS_DIR, SOLUTION_DIR),
        test_env=_test_env(task),
    )


def _test_env(task: Task) -> Path | None:
    """The task's prepared test environment, which must exist on this machine."""
    path = task.environment.test_env
    if path is not None and not path.is_dir():
        from ahe.errors import AheError

        raise AheError(f"{task.task_toml}: [environment] test_env {path} does not exist on this machine; "
                       "make the task again here (ahe tasks make / derive) so its test environment is made.")
    return path


def make_local_sandbox(task: Task, workdir: Path, *, isolation: str = "auto", network: bool = False) -> Sandbox:
    """An unstarted bubblewrap sandbox for one trial of `task` (also used by `ahe run`)."""
    from ahe.sandbox.builtin_backends import local_sandbox_for

    return local_sandbox_for(sandbox_request(task, workdir), isolation=isolation, network=network)


def backend_factory(name: str, options: BackendOptions | None = None) -> SandboxFactory:
    """A factory of the backend called `name` (AheError naming the valid ones otherwise)."""
    backend = get_backend(name)
    opts = options or BackendOptions()
    if backend.prepare is not None:
        backend.prepare(opts)

    def make(task: Task, workdir: Path) -> "Sandbox | Awaitable[Sandbox]":
        return backend.make(sandbox_request(task, workdir), opts)

    return make


def ready_backend(name: str, isolation: str = "auto") -> None:
    """Fail now, in one sentence, when backend `name` does not exist or cannot run here (e.g.
    docker with no reachable engine) — never later in every trial, never by running locally."""
    backend_factory(name, BackendOptions(isolation=isolation))  # type: ignore[arg-type]
    if name == "docker" and isolation != "none" and os.environ.get("AHE_CONFINE") != "none":
        # the harness's worker runs in a container of its own there: an engine that cannot run it
        # (another architecture, another machine) stops the run now, never falls back to this machine
        from ahe.confine.container import ContainerUnfit, ready_for_workers
        from ahe.errors import AheError

        try:
            ready_for_workers()
        except ContainerUnfit as exc:
            raise AheError(str(exc)) from None


def factories_for(
    sandbox: str, *, isolation: str = "auto", default_image: str | None = None, client: object = None
) -> dict[str, SandboxFactory]:
    """The backend's factory keyed by each task kind (`Task.runs_on`) it can run."""
    backend = get_backend(sandbox)
    make = backend_factory(sandbox, BackendOptions(isolation=isolation, default_image=default_image, client=client))  # type: ignore[arg-type]
    return {kind: make for kind in backend.kinds}


def docker_sandbox_factory(*, default_image: str | None = None, client: object = None) -> SandboxFactory:
    """The docker backend's factory (tests and callers that want containers only)."""
    return backend_factory("docker", BackendOptions(default_image=default_image, client=client))


def can_run(sandbox: str, task: Task) -> bool:
    return task.runs_on in get_backend(sandbox).kinds
