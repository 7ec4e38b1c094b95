"""The worker's container under the docker sandbox: a per-trial sidecar beside the task's container.

It shares nothing with the task's container and nothing with the host but what is bound into it,
all read-only: the host's Python installation and its import folders at /opt/ahe-py/N,
AHE's `ahe/` package at /opt/ahe/ahe, the harness workspace at /workspace, the folders of the
host's shared libraries at /opt/ahe-lib/N, and the trial's socket folder at /run/ahe (read-only
too: a unix socket opens through it, and no file lands in this machine's folder). /tmp and /trace
are private size-limited tmpfs; the root file system is read-only; no network (`network_mode:
none`, whatever the task is allowed); every capability dropped, `no-new-privileges`, a process
limit; a uid of its own (not root).

The interpreter is started through the host's own dynamic loader
(`/opt/ahe-lib/0/ld-linux-x86-64.so.2 --library-path <python's lib>:/opt/ahe-lib/0 python`),
so it needs nothing of the image: it runs in the offline busybox base image AHE builds
(`ahe-offline-base`), in an empty one, or on musl. When the engine cannot run it (another CPU
architecture, an engine on another machine whose folders are not ours), starting fails with one
sentence that says what to do — never a quiet fallback to the host (docs/confinement.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ahe.confine.jail import AHE_PACKAGE, JAIL_AHE_ROOT, JAIL_TRACE, JAIL_WORKSPACE, TMP_LIMIT_BYTES, TRACE_LIMIT_BYTES
from ahe.confine.jail import WorkerCommand, boot_args, library_paths
from ahe.confine.wire import JAIL_SOCKET_DIR, SOCKET_NAME
from ahe.errors import InfrastructureError

LIB_ROOT = "/opt/ahe-lib"  # the host's library folders, one bind each: /opt/ahe-lib/0, /1, ...
PY_ROOT = "/opt/ahe-py"  # the interpreter's installation and import folders, one bind each
WORKER_UID = 65534  # the worker's uid when AHE runs as root ("nobody"; it owns only the socket folder)
PIDS_LIMIT = 256
MEMORY_LIMIT = "2g"
LABEL_WORKER = "ahe.worker"
# What the worker prints lands in the engine's log on this machine's disk: capped (the host
# reads only the last lines, when a worker fails to start).
LOG_CONFIG = {"type": "json-file", "config": {"max-size": "1m", "max-file": "1"}}


class ContainerUnfit(InfrastructureError):
    """The engine cannot run the worker (architecture, a remote engine, no loader): one sentence."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="worker")


@dataclass(frozen=True)
class HostRuntime:
    """How to start this machine's interpreter anywhere: its loader, its library folders."""

    loader: str | None  # the dynamic loader as the container sees it (None: a static interpreter)
    own_libs: tuple[str, ...]  # host folders of the interpreter's own libraries (libpython), searched first
    binds: tuple[tuple[str, str], ...]  # (host folder, folder in the container), read-only


@functools.lru_cache(maxsize=1)
def host_runtime() -> HostRuntime:
    """The loader and the folders of every shared library the interpreter links (from `ldd`);
    the interpreter's own lib folder first, so that a system libpython of another build never
    stands in for its own."""
    exe = os.path.realpath(sys.executable)
    try:
        out = subprocess.run(["ldd", exe], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ContainerUnfit(f"cannot list the libraries of {exe} (ldd: {exc})") from None
    prefixes = [os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)]
    own, system, loader = [], [], None
    for line in out.splitlines():
        m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if not m:
            continue
        path = os.path.realpath(m.group(1))
        folder = os.path.dirname(path)
        if "=>" not in line:  # the loader's own line
            loader = path
        if any(folder == p or folder.startswith(p + os.sep) for p in prefixes):
            own.append(folder)
        else:
            system.append(folder)
    system = list(dict.fromkeys(system))
    at = {f: f"{LIB_ROOT}/{i}" for i, f in enumerate(system)}
    loader_in = None if loader is None else f"{at[os.path.dirname(loader)]}/{os.path.basename(loader)}"
    return HostRuntime(loader=loader_in, own_libs=tuple(dict.fromkeys(own)), binds=tuple(at.items()))


def check_engine(client: Any) -> None:
    """ContainerUnfit unless the engine runs containers of this machine (same architecture, a
    local engine whose bind sources are this machine's folders)."""
    _check_engine_cached(id(client), client)


@functools.lru_cache(maxsize=8)
def _check_engine_cached(_key: int, client: Any) -> None:
    base = str(getattr(client.api, "base_url", ""))
    if not base.startswith("http+docker://localhost") and not base.startswith("http+docker://localunixsocket"):
        raise ContainerUnfit(f"the Docker engine at {base} is not on this machine, so AHE's interpreter and the "
                             "harness cannot be bound into the worker's container; use a local engine (unix socket)")
    info = client.info()
    theirs = str(info.get("Architecture") or "?")
    ours = platform.machine()
    if _arch(theirs) != _arch(ours) or str(info.get("OSType") or "linux") != "linux":
        raise ContainerUnfit(f"the Docker engine runs {info.get('OSType')}/{theirs} containers and AHE's interpreter "
                             f"is linux/{ours}; use an engine of this machine's architecture")


def _arch(name: str) -> str:
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(name.lower(), name.lower())


def worker_user() -> tuple[int, int]:
    """The worker's uid:gid: not root's when AHE is root, else AHE's own (a socket it can open)."""
    if os.geteuid() == 0:
        return WORKER_UID, WORKER_UID
    return os.getuid(), os.getgid()


def prepare_socket_dir(socket_dir: Path) -> None:
    """The socket folder (inside AHE's private 0700 folder, so no host user reaches it) and its
    socket handed to the worker's uid."""
    uid, gid = worker_user()
    if os.geteuid() == 0:
        for p in [socket_dir, *socket_dir.iterdir()]:
            os.chown(p, uid, gid)
    os.chmod(socket_dir, 0o700)


def worker_readable(workspace: Path, private: Path) -> Path:
    """`workspace` when the worker's uid can read all of it, else a copy under `private` that it
    can: a folder of mode 0700 or a file of 0600 (a umask of 077, a Ray node's unpacked cache)
    would stop the harness from loading in its container. `.git` is neither checked nor copied."""
    root = Path(workspace).resolve()
    if worker_user()[0] == os.getuid() or _readable_by_others(root):
        return root
    copy = private / "workspace"
    shutil.copytree(root, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    for folder, dirs, files in os.walk(copy):
        os.chmod(folder, 0o755)
        for name in files:
            f = os.path.join(folder, name)
            if not os.path.islink(f):
                os.chmod(f, os.stat(f).st_mode | 0o444)
    return copy


def _readable_by_others(root: Path) -> bool:
    for folder, dirs, files in os.walk(root):
        if ".git" in dirs:
            dirs.remove(".git")
        if os.stat(folder).st_mode & 0o005 != 0o005:
            return False
        for name in files:
            st = os.stat(os.path.join(folder, name), follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and not st.st_mode & 0o004:
                return False
    return True


def python_binds() -> dict[str, str]:
    """Host folder -> folder in the container for the interpreter's prefixes and every import
    folder outside them. Not at their own paths: an image's /root or /home (mode 0700) would
    hide a prefix under a home folder from the worker's uid."""
    prefixes = list(dict.fromkeys(os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)))
    libs = [p for p in library_paths() if not any(p == x or p.startswith(x + os.sep) for x in prefixes)]
    return {host: f"{PY_ROOT}/{i}" for i, host in enumerate(dict.fromkeys(prefixes + libs))}


def inside(path: str, binds: dict[str, str]) -> str:
    """`path` (a host path under one of `binds`) as the container sees it."""
    real = os.path.realpath(path)
    for host in sorted(binds, key=len, reverse=True):
        if real == host or real.startswith(host + os.sep):
            return binds[host] + real[len(host):]
    raise ContainerUnfit(f"{path} is not under any folder bound into the worker's container")


def container_config(image: str, socket_path: str, workspace: Path, socket_dir: Path, env: dict[str, str],
                     labels: dict[str, str]) -> dict[str, Any]:
    """create_container's arguments (and host config's) for one worker."""
    rt = host_runtime()
    pybinds = python_binds()
    binds: dict[str, dict[str, str]] = {host: {"bind": at, "mode": "ro"} for host, at in pybinds.items()}
    for host, at in rt.binds:
        binds[host] = {"bind": at, "mode": "ro"}
    binds[str(AHE_PACKAGE)] = {"bind": f"{JAIL_AHE_ROOT}/ahe", "mode": "ro"}
    binds[str(Path(workspace).resolve())] = {"bind": JAIL_WORKSPACE, "mode": "ro"}
    binds[str(socket_dir)] = {"bind": JAIL_SOCKET_DIR, "mode": "ro"}  # a socket opens through a read-only bind
    tmpfs = {"/tmp": f"size={TMP_LIMIT_BYTES},mode=1777", JAIL_TRACE: f"size={TRACE_LIMIT_BYTES},mode=1777"}
    bundled = AHE_PACKAGE / "_bundled"  # the bundled tasks (their tests too), hidden as in the bwrap jail
    if bundled.is_dir():
        tmpfs[f"{JAIL_AHE_ROOT}/ahe/_bundled"] = "size=4096"
        with contextlib.suppress(ContainerUnfit):
            tmpfs[inside(str(bundled), pybinds)] = "size=4096"
    exe = inside(os.path.realpath(sys.executable), pybinds)
    own = [inside(p, pybinds) for p in rt.own_libs]
    boot = boot_args([JAIL_AHE_ROOT] + [inside(p, pybinds) for p in library_paths()], socket_path)
    boot.append("--exit-with-host")  # nothing else ends it when AHE dies (worker.py)
    libpath = ":".join(own + [at for _, at in rt.binds])
    argv = ([rt.loader, "--library-path", libpath, exe] if rt.loader else [exe]) + boot
    uid, gid = worker_user()
    return {"image": image, "command": argv, "entrypoint": [], "user": f"{uid}:{gid}", "environment": env,
            "working_dir": "/tmp", "labels": labels, "hostname": "ahe-worker", "network_disabled": True,
            "host_config": {"network_mode": "none", "read_only": True, "binds": binds, "tmpfs": tmpfs,
                            "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"], "pids_limit": PIDS_LIMIT,
                            "mem_limit": MEMORY_LIMIT, "memswap_limit": MEMORY_LIMIT, "init": True,
                            "ipc_mode": "private", "log_config": LOG_CONFIG}}


class _Logs:
    """`proc.stderr.read()` for a container: its logs once it has exited."""

    def __init__(self, proc: "ContainerProcess") -> None:
        self.proc = proc

    async def read(self) -> bytes:
        if self.proc.container_id is None:
            return b""
        try:
            return await asyncio.to_thread(self.proc.client.api.logs, self.proc.container_id, stdout=False,
                                           stderr=True)
        except Exception:  # the container is already gone
            return b""


class ContainerProcess:
    """The worker's container, seen as the host side sees a worker process: `returncode`, `wait`,
    `stderr.read()`, and `remove` (which kills everything in it)."""

    pid = None

    def __init__(self, client: Any, container_id: str) -> None:
        self.client, self.container_id = client, container_id
        self.returncode: int | None = None
        self.stderr = _Logs(self)
        self._waiting: asyncio.Future | None = None

    @classmethod
    async def start(cls, client: Any, config: dict[str, Any]) -> "ContainerProcess":
        proc = await asyncio.to_thread(cls._start_blocking, client, config)
        asyncio.ensure_future(proc.wait())  # `returncode` is set as soon as it stops (a dead spare is seen)
        return proc

    @classmethod
    def _start_blocking(cls, client: Any, config: dict[str, Any]) -> "ContainerProcess":
        from ahe.sandbox.docker_engine import install_cleanup_hooks, sweep_stale_once, track

        install_cleanup_hooks()
        sweep_stale_once(client)
        cfg = dict(config)
        host_config = client.api.create_host_config(**cfg.pop("host_config"))
        created = client.api.create_container(host_config=host_config, detach=True, stdin_open=False, tty=False,
                                              **cfg)
        proc = cls(client, created["Id"])
        track(proc.container_id, client)  # removed at exit, on SIGTERM, or by the stale sweep
        try:
            client.api.start(proc.container_id)
        except BaseException:
            proc._remove_blocking()
            raise
        return proc

    async def wait(self) -> int:
        """The container's exit code once it has stopped. One blocking wait per container, in the
        docker backend's own thread pool (never asyncio's small default one), shared by every caller."""
        if self.returncode is None:
            if self._waiting is None:
                from ahe.sandbox.docker_engine import exec_pool

                self._waiting = asyncio.get_running_loop().run_in_executor(exec_pool(), self._wait_blocking)
            code = await asyncio.shield(self._waiting)
            if self.returncode is None:
                self.returncode = code
        return self.returncode

    def _wait_blocking(self) -> int:
        try:
            return int(self.client.api.wait(self.container_id, None).get("StatusCode", -1))
        except Exception:  # removed under us
            return -9

    async def remove(self) -> None:
        await asyncio.to_thread(self._remove_blocking)

    def _remove_blocking(self) -> None:
        from ahe.sandbox.docker_engine import is_not_found, untrack

        if self.container_id is None:
            return
        try:
            self.client.api.remove_container(self.container_id, force=True, v=True)
        except Exception as exc:
            if not is_not_found(exc):
                raise
        untrack(self.container_id)
        if self.returncode is None:
            self.returncode = -9


def worker_image(client: Any) -> str:
    """The worker's image: AHE's offline busybox base (built here, no registry). The worker needs
    nothing of it (its interpreter comes through the host's loader); busybox only gives the
    harness's own subprocesses a shell, which the container's end takes down with them."""
    from ahe.sandbox.docker_images import OFFLINE_BASE_IMAGE, build_offline_base_image

    return build_offline_base_image(client, OFFLINE_BASE_IMAGE)


async def launch_container(workspace: Path, socket_dir: Path, env: dict[str, str],
                           client: Any = None) -> tuple[WorkerCommand, ContainerProcess]:
    """Start one worker's container (the socket in `socket_dir` already listening)."""
    from ahe.sandbox.docker_engine import docker_client, owner_labels

    client = client or await asyncio.to_thread(docker_client)
    image = await asyncio.to_thread(_fit_image, client)
    prepare_socket_dir(socket_dir)
    workspace = await asyncio.to_thread(worker_readable, workspace, socket_dir.parent)
    sock = f"{JAIL_SOCKET_DIR}/{SOCKET_NAME}"
    config = container_config(image, sock, workspace, socket_dir, env, {**owner_labels(), LABEL_WORKER: "1"})
    cmd = WorkerCommand(argv=config["command"], env=env, cwd="/tmp", socket_path=sock, workspace=JAIL_WORKSPACE,
                        trace_dir=JAIL_TRACE)
    try:
        proc = await ContainerProcess.start(client, config)
    except ContainerUnfit:
        raise
    except Exception as exc:
        from ahe.sandbox.docker_engine import one_line

        raise ContainerUnfit(f"the confined worker's container (image {image}) could not start: {one_line(exc)}") from exc
    return cmd, proc


def ready_for_workers(client: Any = None) -> str:
    """The worker's image on the engine, once the engine is known to run this machine's
    interpreter; ContainerUnfit (one sentence, what to do) otherwise. For a run's start."""
    from ahe.sandbox.docker_engine import docker_client

    return _fit_image(client or docker_client())


def _fit_image(client: Any) -> str:
    """The worker's image, after checking that the engine can run this machine's interpreter."""
    try:
        check_engine(client)
        host_runtime()
        image = worker_image(client)
        _probe_cached(id(client), client, image)
    except ContainerUnfit as exc:
        raise ContainerUnfit(f"the harness's confined worker cannot run in a container under --sandbox docker: {exc} "
                             "(or run the task with --sandbox local)") from None
    return image


PROBE_SEC = 60


@functools.lru_cache(maxsize=8)
def _probe_cached(_key: int, client: Any, image: str) -> None:
    """Once per engine and process: this machine's interpreter, started as a worker is, prints a
    word. Fails when the engine does not see this machine's folders (a socket mounted from
    another machine's engine: its binds name that machine's folders) or cannot run its binaries."""
    from ahe.sandbox.docker_engine import one_line, owner_labels
    from ahe.tempdirs import temp_dir

    with temp_dir("worker-probe") as tmp:
        config = container_config(image, f"{JAIL_SOCKET_DIR}/{SOCKET_NAME}", Path(tmp), Path(tmp),
                                  {"PATH": "/usr/bin:/bin"}, {**owner_labels(), LABEL_WORKER: "probe"})
        boot = config["command"].index("-I")  # the interpreter as a worker starts, running one print
        config["command"] = config["command"][:boot] + ["-I", "-S", "-c", "print('ahe-worker-ok')"]
        proc = ContainerProcess._start_blocking(client, config)
        try:
            code = client.api.wait(proc.container_id, PROBE_SEC).get("StatusCode", -1)
            logs = client.api.logs(proc.container_id, stdout=True, stderr=True).decode(errors="replace")
        except Exception as exc:
            raise ContainerUnfit(f"this machine's interpreter did not answer in a container ({one_line(exc)})") from None
        finally:
            proc._remove_blocking()
    if code != 0 or "ahe-worker-ok" not in logs:
        tail = " | ".join(logs.strip().splitlines()[-2:])[-300:] or f"exit code {code}"
        raise ContainerUnfit(f"this machine's interpreter does not start in a container of the engine ({tail}); "
                             "the engine must run on this machine and see its folders")
