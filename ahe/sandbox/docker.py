"""The docker backend: one container per trial, driven through the docker SDK (DESIGN.md §5).

A `DockerSandbox` creates one container when it starts and keeps it alive for the whole
trial (its main process only sleeps; `docker-init` reaps orphans), so background processes
survive between `exec` calls. Network is off unless asked for, CPU and memory are limited,
and the container is removed on `stop()` — and also at interpreter exit, on SIGTERM/SIGHUP,
and by `cleanup_stale_containers()` once its owner process is dead (see `docker_engine`).

Each `exec` runs `bash -c` (or `sh -c` when the image has no bash) through a small `sh`
wrapper that records the command's pid (= its process group: docker makes every exec a
session leader), sends stdout/stderr to `/logs/exec/NNNN.stdout|stderr` inside the
container, changes to `cwd`, and replays both files when the command ends. On timeout a
second exec kills the whole process group (`timed_out=True`, exit 124).

The SDK is blocking: its calls run in worker threads, and a running command waits in a
thread of the backend's own pool. Files: `docker_files.ContainerFiles`; images:
`docker_images.ensure_image`; the factory the rollout engine calls:
`create_docker_sandbox_for`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import posixpath
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ahe.sandbox.base import CHANNEL_DIR, ExecResult, Mount, SandboxError
from ahe.sandbox.docker_engine import (
    LABEL_OWNER_HOST,
    LABEL_OWNER_PID,
    LABEL_OWNER_START,
    LABEL_SANDBOX,
    cleanup_stale_containers,
    connect,
    docker_client,
    engine_status,
    exec_attached,
    exec_pool,
    install_cleanup_hooks,
    is_not_found,
    live_container_ids,
    one_line,
    owner_labels,
    sweep_stale_once,
    track,
    untrack,
)
from ahe.sandbox.docker_files import ContainerFiles
from ahe.sandbox.docker_images import DOCKERFILE_NAME, ensure_image

__all__ = [
    "LABEL_OWNER_HOST",
    "LABEL_OWNER_PID",
    "LABEL_OWNER_START",
    "LABEL_SANDBOX",
    "DockerSandbox",
    "cleanup_stale_containers",
    "connect",
    "create_docker_sandbox_for",
    "engine_status",
    "live_container_ids",
]

log = logging.getLogger(__name__)

EXEC_LOG_DIR = "/logs/exec"
DROPPED_CAPS = ("MKNOD", "NET_RAW", "AUDIT_WRITE", "SETFCAP", "SETPCAP")
PIDS_LIMIT = 4096
TIMEOUT_EXIT_CODE = 124
# Output larger than this (per stream) is returned as head + tail; the file keeps it all.
MAX_CAPTURED_BYTES = 32 * 1024 * 1024

# The container's main process: sleep forever (docker-init, PID 1, reaps orphans).
_KEEPALIVE = (
    f"mkdir -p {EXEC_LOG_DIR} 2>/dev/null; "
    "exec sleep infinity 2>/dev/null || while :; do sleep 3600; done"
)
# Prints file $1 to stdout, or its head and tail with a note when it exceeds $2 bytes.
_EMIT_FN = (
    'emit() { s=$(wc -c < "$1" 2>/dev/null) || s=0; s=$((s + 0)); h=$(($2 / 2)); '
    'if [ "$s" -gt "$2" ]; then head -c "$h" "$1"; '
    "printf '\\n[... %s bytes not shown; full output in %s ...]\\n' \"$((s - 2 * h))\" \"$1\"; "
    'tail -c "$h" "$1"; else cat "$1" 2>/dev/null; fi; }; '
)
# $1 = output path prefix, $2 = shell, $3 = cwd ('' = container workdir), $4 = the command,
# $5 = the most bytes of each stream to replay. The command's output goes to files (so
# background children never hold the exec's pipes open); once it ends, the wrapper replays
# them on its own stdout/stderr, which the engine demultiplexes for us.
_EXEC_WRAPPER = (
    f'mkdir -p {EXEC_LOG_DIR} 2>/dev/null; echo $$ > "$1.pid"; '
    '( if [ -n "$3" ]; then cd "$3" || exit 1; fi; exec "$2" -c "$4" ) '
    '> "$1.stdout" 2> "$1.stderr" < /dev/null; code=$?; '
    + _EMIT_FN
    + 'emit "$1.stdout" "$5"; emit "$1.stderr" "$5" >&2; exit $code'
)
# $1 = output path prefix, $2 = the most bytes: replays what a killed command had written.
_REPLAY_SCRIPT = _EMIT_FN + 'emit "$1.stdout" "$2"; emit "$1.stderr" "$2" >&2'
# $1 = output path prefix. Waits (bounded) for the pid file, then kills the process group.
_KILL_SCRIPT = (
    'i=0; while [ ! -s "$1.pid" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; '
    'p=$(cat "$1.pid" 2>/dev/null); [ -n "$p" ] || exit 0; '
    'kill -KILL -"$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; exit 0'
)


# ---- the sandbox -------------------------------------------------------------------------------


class DockerSandbox(ContainerFiles):
    """One container for one trial. Use `async with DockerSandbox(image) as sb:` or start/stop.

    Paths given to the file methods may be absolute or relative to `workdir`.
    `ExecResult.stdout_path` / `stderr_path` are paths *inside the container*
    (`/logs/exec/NNNN.stdout`), readable with `read_file` or the agent's own tools.
    """

    worker_mode = "docker"  # a confined worker for a trial here runs in a container of its own (ahe/confine)

    def __init__(
        self,
        image: str,
        *,
        cpus: float | None = None,
        memory_mb: int | None = None,
        network: bool = False,
        workdir: str = "/app",
        env: Mapping[str, str] | None = None,
        mounts: Iterable[Mount] = (),
        name_prefix: str = "ahe",
        labels: Mapping[str, str] | None = None,
        client: Any = None,
        max_output_bytes: int = MAX_CAPTURED_BYTES,
    ) -> None:
        self.image = image
        self.max_output_bytes = max_output_bytes
        self.cpus = cpus
        self.memory_mb = memory_mb
        self.network = network
        self.workdir = workdir
        self.env = dict(env or {})
        self.mounts = list(mounts)
        self.labels = dict(labels or {})
        self.name = f"{name_prefix}-{uuid.uuid4().hex[:12]}"
        self.container_id: str | None = None
        self.shell = "bash"
        self._client = client
        self._seq = itertools.count(1)
        self._stopped = False

    def channel(self) -> tuple[Path, str] | None:
        """(host folder, the same folder inside) for a unix socket the container's programs
        can reach without network: the mount at CHANNEL_DIR, when the sandbox was given one
        (a local engine; a remote engine's bind sources are not this host's folders)."""
        for m in self.mounts:
            if m.target == CHANNEL_DIR:
                return Path(m.source), m.target
        return None

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """(usable, why): whether a Docker engine answers (see `engine_status`)."""
        return engine_status()

    # -- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> DockerSandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = docker_client()
        return self._client

    async def start(self) -> None:
        if self.container_id is not None:
            return
        if self._stopped:
            raise SandboxError(f"sandbox {self.name} was stopped; create a new one.")
        install_cleanup_hooks()  # here, in the event loop's thread: signals need the main one
        await asyncio.to_thread(self._start_blocking)

    def _start_blocking(self) -> None:
        client = self.client
        sweep_stale_once(client)
        host_config = client.api.create_host_config(
            network_mode=None if self.network else "none",
            nano_cpus=int(self.cpus * 1e9) if self.cpus else None,
            mem_limit=f"{int(self.memory_mb)}m" if self.memory_mb else None,
            memswap_limit=f"{int(self.memory_mb)}m" if self.memory_mb else None,
            binds={
                str(Path(m.source).resolve()): {
                    "bind": m.target,
                    "mode": "rw" if m.writable else "ro",
                }
                for m in self.mounts
            }
            or None,
            init=True,
            # what no task needs: device nodes, raw sockets, file capabilities (issue 33); a fork
            # bomb stops at the container's own limit, not the host's
            cap_drop=list(DROPPED_CAPS),
            pids_limit=PIDS_LIMIT,
        )
        labels = {**self.labels, **owner_labels()}
        try:
            created = client.api.create_container(
                self.image,
                command=[_KEEPALIVE],
                entrypoint=["/bin/sh", "-c"],
                name=self.name,
                labels=labels,
                environment=self.env or None,
                working_dir=self.workdir,
                host_config=host_config,
                detach=True,
                stdin_open=False,
                tty=False,
            )
        except Exception as exc:
            if is_not_found(exc):
                raise SandboxError(
                    f"image {self.image!r} is not on the Docker engine: build or pull it first "
                    "(ahe.sandbox.docker_images.ensure_image)."
                ) from exc
            raise SandboxError(
                f"creating a container from {self.image!r} failed: {one_line(exc)}"
            ) from exc
        container_id = created["Id"]
        track(container_id, client)
        self.container_id = container_id
        try:
            client.api.start(container_id)
            # As root, so that an image whose USER is not root still gets /logs/exec.
            probe = (
                f"mkdir -p {EXEC_LOG_DIR} {posixpath.join('/', self.workdir)} && "
                f"chmod 1777 {EXEC_LOG_DIR} && "
                "{ command -v bash >/dev/null 2>&1 && echo bash || echo sh; }"
            )
            exit_code, out = self._run_small(["/bin/sh", "-c", probe], user="0")
            if exit_code != 0:
                raise SandboxError(
                    f"the container of {self.image!r} cannot run /bin/sh commands "
                    f"(exit {exit_code}): {out.decode(errors='replace').strip()[:300]}"
                )
            self.shell = out.decode().strip().splitlines()[-1] or "sh"
            if self._stopped:  # stop() came while we were starting (e.g. a cancelled trial)
                raise SandboxError(f"sandbox {self.name} was stopped while starting.")
        except BaseException as exc:
            self._remove_blocking()
            if isinstance(exc, SandboxError):
                raise
            if isinstance(exc, Exception):
                raise SandboxError(
                    f"starting a container from {self.image!r} failed: {one_line(exc)}"
                ) from exc
            raise

    async def kill_processes(self) -> int:
        """End every process of the container (the agent's phase is over): the container is
        restarted, which ends its pid namespace — processes, their tracers and anything they did to
        its init — and keeps its files. The verifier then starts in a fresh process tree."""
        try:
            await asyncio.to_thread(self.client.api.restart, self._cid(), timeout=0)
        except Exception as exc:
            raise self._dead(exc, "ending the agent's processes") from exc
        return 0

    async def system_changes(self) -> list[str]:
        """The paths added or changed in the container since its image (`docker diff`): how the
        verifier sees a system program the agent replaced (ahe/tasks/verifier_guard.py)."""
        try:
            diff = await asyncio.to_thread(self.client.api.diff, self._cid())
        except Exception as exc:
            raise self._dead(exc, "listing the container's changes") from exc
        return [d["Path"] for d in diff or () if d.get("Kind") in (0, 1)]

    def _run_small(self, cmd: list[str], user: str = "") -> tuple[int, bytes]:
        """Run a short helper command to completion; (exit code, stdout+stderr)."""
        api = self.client.api
        created = api.exec_create(self._cid(), cmd, stdout=True, stderr=True, user=user)
        out, err = exec_attached(api, created["Id"])
        info = api.exec_inspect(created["Id"])
        code = info.get("ExitCode")
        return (-1 if code is None else int(code)), out + err

    async def stop(self) -> None:
        """Remove the container (force). Safe to call twice or before `start`."""
        self._stopped = True
        if self.container_id is None:
            return
        await asyncio.to_thread(self._remove_blocking)

    def _remove_blocking(self) -> None:
        container_id = self.container_id
        if container_id is None:
            return
        last: Exception | None = None
        for attempt in range(3):
            try:
                self.client.api.remove_container(container_id, force=True, v=True)
                break
            except Exception as exc:
                if is_not_found(exc):
                    break
                last = exc
                time.sleep(0.2 * (attempt + 1))
        else:
            # Still tracked, so the atexit hook tries again.
            raise SandboxError(
                f"removing container {container_id[:12]} failed: {one_line(last)}"
            ) from last
        untrack(container_id)
        self.container_id = None

    def _cid(self) -> str:
        if self.container_id is None:
            raise SandboxError(f"sandbox {self.name} is not running: call start() first.")
        return self.container_id

    def _dead(self, exc: BaseException, doing: str) -> SandboxError:
        if is_not_found(exc):
            return SandboxError(f"container {self.name} is gone while {doing}.")
        return SandboxError(f"the Docker engine failed while {doing}: {one_line(exc)}")

    # -- commands ---------------------------------------------------------------------------

    async def exec(
        self,
        command: str,
        *,
        timeout: float | None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        background: bool = False,
    ) -> ExecResult:
        """Run `bash -c command` (`sh -c` without bash); see the Sandbox protocol.

        On timeout the command's whole process group is killed: exit 124, `timed_out=True`.
        `timeout=None` waits as long as it takes.
        """
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout}")
        container_id = self._cid()
        prefix = f"{EXEC_LOG_DIR}/{next(self._seq):04d}"
        paths = {"stdout_path": f"{prefix}.stdout", "stderr_path": f"{prefix}.stderr"}
        started = time.monotonic()
        exec_id = await self._start_exec(container_id, prefix, command, cwd, env, background)
        if background:
            return ExecResult(exit_code=0, background=True, duration_sec=time.monotonic() - started, **paths)
        stdout, stderr, killed_at = await self._wait_attached(exec_id, prefix, timeout)
        if killed_at is not None:
            return ExecResult(
                exit_code=TIMEOUT_EXIT_CODE,
                stdout=stdout,
                stderr=stderr,
                timed_out=True,
                duration_sec=killed_at - started,
                **paths,
            )
        exit_code = await self._exit_code(exec_id)
        return ExecResult(
            exit_code=exit_code,
            stdout=stdout,
            stderr=stderr,
            duration_sec=time.monotonic() - started,
            **paths,
        )

    async def _start_exec(self, container_id: str, prefix: str, command: str, cwd: str | None,
                          env: dict[str, str] | None, background: bool) -> str:
        """Create the exec of `command` in the output-capturing wrapper (started at once, detached, in the background)."""
        argv = [
            "/bin/sh", "-c", _EXEC_WRAPPER, "ahe-exec",
            prefix, self.shell, cwd or "", command, str(self.max_output_bytes),
        ]  # fmt: skip
        environment = [f"{k}={v}" for k, v in (env or {}).items()] or None
        api = self.client.api
        try:
            created = await asyncio.to_thread(
                api.exec_create,
                container_id,
                argv,
                stdout=not background,
                stderr=not background,
                environment=environment,
            )
            if background:
                await asyncio.to_thread(api.exec_start, created["Id"], detach=True)
        except Exception as exc:
            raise self._dead(exc, "starting a command") from exc
        return created["Id"]

    async def _wait_attached(self, exec_id: str, prefix: str, timeout: float | None) -> tuple[str, str, float | None]:
        """(stdout, stderr, None) of a command run to its end; on timeout its process group is
        killed and what it wrote is read back from its files: (stdout, stderr, when it was killed)."""
        # The attached exec blocks a thread until the command ends: use our own pool so that
        # long commands in many sandboxes never starve asyncio's default executor.
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(exec_pool(), self._attached_exec, exec_id)
        try:
            stdout, stderr = await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            await self._kill_group(prefix)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(future), 10.0)
            killed_at = time.monotonic()
            stdout, stderr = await asyncio.to_thread(self._replay_outputs, prefix)
            return stdout, stderr, killed_at
        except asyncio.CancelledError:
            # The caller gave up (e.g. the trial was cancelled): do not leave the command running.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._kill_group(prefix))
            raise
        return stdout, stderr, None

    async def _exit_code(self, exec_id: str) -> int:
        try:
            info = await asyncio.to_thread(self.client.api.exec_inspect, exec_id)
        except Exception as exc:
            raise self._dead(exc, "reading a command's exit code") from exc
        exit_code = info.get("ExitCode")
        if exit_code is None:  # the stream ended but the process did not: the engine failed
            raise SandboxError(f"container {self.name} lost track of a command (no exit code).")
        return int(exit_code)

    def _attached_exec(self, exec_id: str) -> tuple[str, str]:
        """Start an exec and wait for its end; (stdout, stderr) as the wrapper replays them."""
        try:
            out, err = exec_attached(self.client.api, exec_id)
        except Exception as exc:
            raise self._dead(exc, "running a command") from exc
        return (
            (out or b"").decode("utf-8", errors="replace"),
            (err or b"").decode("utf-8", errors="replace"),
        )

    async def _kill_group(self, prefix: str) -> None:
        cmd = ["/bin/sh", "-c", _KILL_SCRIPT, "ahe-kill", prefix]
        try:
            await asyncio.to_thread(self._run_small, cmd, "0")
        except Exception as exc:
            raise self._dead(exc, "killing a timed-out command") from exc

    def _replay_outputs(self, prefix: str) -> tuple[str, str]:
        """(stdout, stderr) of a command from its files, e.g. after it was killed."""
        cmd = ["/bin/sh", "-c", _REPLAY_SCRIPT, "ahe-replay", prefix, str(self.max_output_bytes)]
        try:
            created = self.client.api.exec_create(self._cid(), cmd, stdout=True, stderr=True)
        except Exception as exc:
            raise self._dead(exc, "reading a command's output") from exc
        return self._attached_exec(created["Id"])

# ---- the factory the rollout engine calls -----------------------------------------------------


async def create_docker_sandbox_for(
    environment_dir: Path | None,
    docker_image: str | None,
    cpus: float | None,
    memory_mb: int | None,
    network: bool,
    task_name: str,
    *,
    env: Mapping[str, str] | None = None,
    mounts: Iterable[Mount] = (),
    build_timeout_sec: float | None = 600.0,
    default_image: str | None = None,
    workdir: str = "/app",
    client: Any = None,
) -> DockerSandbox:
    """Make sure the task's image exists (pull or build, cached) and return a sandbox for it.

    The sandbox is not started yet: `async with sandbox:` or `await sandbox.start()`.
    `environment_dir` is the task's `environment/` folder; its Dockerfile, if any, is built
    with that folder as context. `default_image` serves tasks that have neither.
    """
    client = client or await asyncio.to_thread(docker_client)
    dockerfile_dir = environment_dir
    has_dockerfile = environment_dir is not None and (environment_dir / DOCKERFILE_NAME).is_file()
    if not has_dockerfile:
        dockerfile_dir = None
    image = docker_image
    if image is None and not has_dockerfile:
        image = default_image
    resolved = await asyncio.to_thread(
        ensure_image,
        image=image,
        dockerfile_dir=dockerfile_dir,
        client=client,
        name=task_name,
        build_timeout_sec=build_timeout_sec,
    )
    return DockerSandbox(
        resolved,
        cpus=cpus,
        memory_mb=memory_mb,
        network=network,
        workdir=workdir,
        env=env,
        mounts=mounts,
        labels={"ahe.task": task_name},
        client=client,
    )
