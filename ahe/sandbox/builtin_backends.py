"""The backends AHE ships: `local` (bubblewrap) and `docker`. Registered on first use of
the registry; each backend's heavy module is imported only when it makes a sandbox."""

from __future__ import annotations

from ahe.sandbox.backend_types import BackendOptions, SandboxBackend, SandboxRequest, register_backend

TEST_ENV_MOUNT = "/opt/ahe-env"  # where a task's test environment appears in the jail


def local_sandbox_for(request: SandboxRequest, *, isolation: str = "auto", network: bool | None = None):
    """An unstarted `LocalSandbox`: `request.app_dir` becomes /app; /logs, /tmp and HOME live
    in `<workdir>/root`; empty, trial-private folders are bound at the stage dirs (/tests,
    /solution) for the verifier and the oracle (the sandbox's root is read-only)."""
    from ahe.sandbox.base import Mount
    from ahe.sandbox.local import LocalSandbox

    root_dir = request.workdir / "root"
    root_dir.mkdir(parents=True, exist_ok=True)
    mounts = []
    for target in request.stage_dirs:
        source = request.workdir / "stage" / target.strip("/")
        source.mkdir(parents=True, exist_ok=True)
        mounts.append(Mount(source=source, target=target, writable=True))
    if request.test_env is not None:
        mounts.append(Mount(source=request.test_env, target=TEST_ENV_MOUNT, writable=False))
    return LocalSandbox(
        request.app_dir, root_dir=root_dir, mounts=mounts,
        network=request.network if network is None else network,
        isolation=isolation,  # type: ignore[arg-type]
    )


def _make_local(request: SandboxRequest, options: BackendOptions):
    return local_sandbox_for(request, isolation=options.isolation, network=False)


def _make_docker(request: SandboxRequest, options: BackendOptions):
    from ahe.sandbox.docker_deferred import DeferredDockerSandbox

    if request.kind == "local" and not options.default_image:
        # local tasks next to docker tasks keep running in bubblewrap
        return _make_local(request, options)
    return DeferredDockerSandbox(request, default_image=options.default_image, client=options.client)


def _prepare_docker(options: BackendOptions) -> None:
    from ahe.errors import AheError

    try:
        import ahe.sandbox.docker  # noqa: F401 - fail once here, not in every trial
    except ImportError as exc:
        raise AheError(
            f"--sandbox docker: the docker backend cannot be imported ({exc}); "
            "install AHE with its docker dependency or run local tasks only."
        ) from None
    if options.client is None:  # fail here, once, in one sentence: never fall back to local quietly
        from ahe.sandbox.base import SandboxError
        from ahe.sandbox.docker_engine import docker_client

        try:
            docker_client()
        except SandboxError as exc:
            raise AheError(f"--sandbox docker: {exc} Or use --sandbox local.") from None


register_backend(SandboxBackend(
    name="local", summary="bubblewrap on this machine (local tasks; docker tasks are skipped)",
    kinds=("local",), make=_make_local,
))
register_backend(SandboxBackend(
    name="docker", summary="one container per trial on a Docker engine (local tasks stay in bubblewrap "
    "unless a default image is given)",
    kinds=("local", "docker"), make=_make_docker, prepare=_prepare_docker,
))
