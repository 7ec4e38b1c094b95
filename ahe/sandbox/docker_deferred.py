"""A docker sandbox whose image is made (pulled or built) when it starts.

Factories must return a sandbox without blocking, while making a docker image can take
minutes; so `start()` resolves the image through `ahe.sandbox.docker` and starts the
container, and every other call is passed on to it. A local task (no image, no Dockerfile)
runs on `default_image`, with its prepared /app folder uploaded after start.
"""

from __future__ import annotations

from pathlib import Path

from ahe.sandbox.base import CHANNEL_DIR, ExecResult, Mount, Sandbox, SandboxError
from ahe.sandbox.backend_types import SandboxRequest


class DeferredDockerSandbox:
    worker_mode = "docker"  # a confined worker for a trial here runs in a container of its own (ahe/confine)

    def __init__(self, request: SandboxRequest, *, default_image: str | None = None, client: object = None) -> None:
        self.request = request
        self.default_image = default_image
        self.client = client
        self.inner: Sandbox | None = None
        self._stopped = False

    async def start(self) -> None:
        from ahe.sandbox.docker import create_docker_sandbox_for

        if self.inner is not None or self._stopped:
            raise SandboxError("this sandbox was already started; make a new one per trial")
        r = self.request
        if r.kind == "local" and not self.default_image:
            raise SandboxError(
                f"task {r.task_name} has no docker_image and no environment/Dockerfile; "
                "run it in the local sandbox or give the docker backend a default image"
            )
        channel = r.workdir / "channel"  # the gateway's socket appears here (command-line agents)
        channel.mkdir(parents=True, exist_ok=True)
        self.inner = await create_docker_sandbox_for(
            r.environment_dir,
            r.docker_image,
            r.cpus,
            r.memory_mb,
            r.network,
            r.task_name,
            env=r.env,
            mounts=[Mount(source=channel, target=CHANNEL_DIR, writable=False)],
            build_timeout_sec=r.build_timeout_sec,
            default_image=self.default_image,
            client=self.client,
        )
        await self.inner.start()
        if r.kind == "local":
            await self.inner.upload(r.app_dir, "/app")

    @property
    def network(self) -> bool:
        return self.request.network

    def channel(self) -> tuple[Path, str] | None:
        return self.inner.channel() if self.inner is not None else None  # type: ignore[attr-defined]

    def _started(self) -> Sandbox:
        if self.inner is None:
            raise SandboxError("the docker sandbox is not running: call start() first")
        return self.inner

    async def exec(self, command: str, *, timeout: float, cwd: str | None = None,
                   env: dict[str, str] | None = None, background: bool = False) -> ExecResult:
        return await self._started().exec(command, timeout=timeout, cwd=cwd, env=env, background=background)

    async def kill_processes(self) -> int:
        return await self._started().kill_processes()  # type: ignore[attr-defined]

    async def system_changes(self) -> list[str]:
        return await self._started().system_changes()  # type: ignore[attr-defined]

    async def read_file(self, path: str) -> bytes:
        return await self._started().read_file(path)

    async def write_file(self, path: str, data: bytes) -> None:
        await self._started().write_file(path, data)

    async def upload(self, local: Path, remote: str) -> None:
        await self._started().upload(local, remote)

    async def download(self, remote: str, local: Path) -> None:
        await self._started().download(remote, local)

    async def stop(self) -> None:
        self._stopped = True
        if self.inner is not None:
            await self.inner.stop()
