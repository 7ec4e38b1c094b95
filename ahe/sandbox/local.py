"""LocalSandbox: the embedded default backend — one long-lived bubblewrap jail per trial.

`start()` launches one bwrap process whose only child is a small driver (`local_driver.py`),
the jail's pid 1; every `exec` is a JSON request to that driver, which forks `bash -c` in its
own session and process group. So state, files and background processes persist until
`kill_processes()` (the agent's phase is over: every process but the driver ends) or `stop()`
(the pid namespace ends), and a command costs a fork+exec, not a new jail. The agent's /logs
is `root_dir/sandbox-logs`; AHE's record of every command's output is `root_dir/logs/exec`,
which the jail cannot reach. Without bubblewrap the same driver runs as a plain host
subprocess: same behaviour, but NO isolation (see docs/sandboxes.md).
"""

from __future__ import annotations

import asyncio
import base64
import errno
import itertools
import json
import logging
import os
import shutil
import subprocess
import sys
import time
import warnings
import weakref
from pathlib import Path
from typing import Any, Literal

from ahe.errors import UnconfinedWarning
from ahe.sandbox import bwrap as bw
from ahe.sandbox import local_orphans as orphans
from ahe.sandbox.base import ExecResult, Mount, SandboxError
from ahe.sandbox.local_direct import direct_listener, next_exec_number
from ahe.tempdirs import make_temp_dir
from ahe.sandbox.local_files import (
    PathMap,
    SandboxPathError,
    copy_file,
    extract_untrusted_tar,
    read_outputs,
    read_regular,
    remove_spares,
    reuse_exec_dir,
    tar_folder,
    upload_tree_is_safe,
    write_host,
)

__all__ = ["LocalSandbox", "SandboxPathError"]

log = logging.getLogger(__name__)

Isolation = Literal["auto", "bwrap", "none"]
DEFAULT_MAX_OUTPUT_BYTES = 32 * 1024 * 1024
_BOOT = "import sys,json;exec(json.loads(sys.stdin.buffer.readline()))"
_DRIVER_PATH = Path(__file__).with_name("local_driver.py")
AGENT_LOGS = "sandbox-logs"  # under root_dir: what the sandbox sees as /logs
_RESERVED_TARGETS = {"/", "/app", "/logs", "/tmp", "/root", "/proc", "/dev"}
_NO_ISOLATION = (
    "LocalSandbox runs commands as plain host subprocesses with NO isolation: the agent sees "
    "and can change the whole machine, has the network, and /app, /logs, /tmp are not remapped"
)
_warned: set[str] = set()
_WATCH_SEC = 1.0  # how often a waiting call looks whether the driver was stopped


class _DriverProtocol(asyncio.Protocol):
    """Splits the driver's stdout into JSON messages; reports end of file."""

    def __init__(self, on_message: Any, on_eof: Any) -> None:
        self._buf = bytearray()
        self._scan = 0
        self._on_message, self._on_eof = on_message, on_eof

    def data_received(self, data: bytes) -> None:
        self._buf += data
        while (i := self._buf.find(b"\n", self._scan)) >= 0:
            line = bytes(self._buf[:i])
            del self._buf[: i + 1]
            self._scan = 0
            self._on_message(json.loads(line))
        self._scan = len(self._buf)

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_eof()


def _emergency_cleanup(proc: subprocess.Popen, root: str | None, direct: str | None = None) -> None:
    """Finalizer/atexit: the sandbox was dropped without stop(). Best effort, never raises."""
    try:
        if proc.poll() is None:
            try:
                proc.stdin.close()  # EOF: the driver kills what it started and exits
                proc.wait(timeout=2)
            except Exception:
                proc.kill()
                proc.wait(timeout=2)
    except Exception:
        pass
    for folder in (root, direct):
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


class LocalSandbox:
    """One trial's machine on this host: bwrap when it works, else plain subprocesses.

    `app_dir` is bound read-write at /app. `root_dir` holds the private /logs, /tmp and
    /root (HOME) plus `driver.log`; a temporary one is made and removed by `stop()` when not
    given. `isolated` tells, after `start()`, whether bwrap is in use.
    """

    def __init__(
        self,
        app_dir: Path,
        *,
        root_dir: Path | None = None,
        mounts: list[Mount] | tuple[Mount, ...] = (),
        network: bool = False,
        isolation: Isolation = "auto",
        env: dict[str, str] | None = None,
        workdir: str = "/app",
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> None:
        if isolation not in ("auto", "bwrap", "none"):
            raise ValueError(f"isolation must be 'auto', 'bwrap' or 'none', not {isolation!r}")
        for m in mounts:
            target = PathMap.check_absolute(m.target, what="mount target")
            if target in _RESERVED_TARGETS:
                raise SandboxPathError(f"mount target {m.target} is reserved by the sandbox; "
                                       "choose another folder such as /data")
        self.app_dir = Path(app_dir).absolute()
        self.root_dir = Path(root_dir).absolute() if root_dir else None
        self.mounts = list(mounts)
        self.network = network
        self.isolation = isolation
        self.env = dict(env or {})
        self.workdir = PathMap.check_absolute(workdir, what="workdir")
        self.max_output_bytes = max_output_bytes
        self._isolated = False
        self._state = "new"  # new -> running -> stopped
        self._owned_root: str | None = None
        self._proc: subprocess.Popen | None = None
        self._rt: asyncio.ReadTransport | None = None
        self._wt: asyncio.WriteTransport | None = None
        self._ready: asyncio.Future | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._exec_numbers = itertools.count(1)
        self._dead: str | None = None
        self._finalizer: weakref.finalize | None = None
        self._paths: PathMap | None = None
        self._direct_dir: str | None = None
        self._driver_pid: int | None = None

    # ----------------------------------------------------------------------- lifecycle

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """(works, why): is bubblewrap installed and able to start a jail here? For `ahe doctor`."""
        return bw.check()

    @property
    def isolated(self) -> bool:
        """True when commands run inside bwrap; False in the no-isolation fallback."""
        return self._isolated

    def channel(self) -> tuple[Path, str] | None:
        """(host folder, the same folder inside) for a unix socket the sandbox's programs can
        reach without network: a folder of the trial-private /tmp. None before start()."""
        if self.root_dir is None or self._state != "running":
            return None
        host = self.root_dir / "tmp" / ".ahe-channel"
        return host, ("/tmp/.ahe-channel" if self._isolated else str(host))

    async def start(self) -> None:
        if self._state != "new":
            raise SandboxError("this LocalSandbox was already started; make a new one per trial")
        for m in self.mounts:
            if not Path(m.source).exists():
                raise SandboxError(f"mount source {m.source} does not exist; create it first")
        self._isolated = await self._choose_isolation()
        try:
            if self.root_dir is None:
                self._owned_root = str(make_temp_dir("sandbox"))
                self.root_dir = Path(self._owned_root)
            root = self.root_dir
            for sub in ("logs/exec", f"{AGENT_LOGS}/exec", "tmp", "home"):
                (root / sub).mkdir(parents=True, exist_ok=True)
            os.chmod(root / "tmp", 0o1777)
            self.app_dir.mkdir(parents=True, exist_ok=True)
            self._paths = PathMap(self._binds(), isolated=self._isolated)
            remove_spares(root / AGENT_LOGS / "exec")
            self._exec_numbers = itertools.count(reuse_exec_dir(root / "logs" / "exec"))
            await self._launch()
        except BaseException:
            self._state = "stopped"  # a failed start leaves nothing behind
            await self._shutdown()
            raise
        self._state = "running"

    async def _choose_isolation(self) -> bool:
        if self.isolation == "none":
            _warn(f"{_NO_ISOLATION} (isolation='none' was asked for).")
            return False
        ok, why = await asyncio.to_thread(bw.check)
        if ok:
            return True
        if self.isolation == "bwrap":
            raise SandboxError(f"cannot isolate the sandbox: {why}")
        _warn(f"{_NO_ISOLATION}, because {why}.")
        return False

    def _binds(self) -> list[bw.Bind]:
        root = self.root_dir
        binds = [bw.Bind(str(self.app_dir), "/app", True),
                 bw.Bind(str(root / AGENT_LOGS), "/logs", True)]
        if self._isolated:
            binds += [bw.Bind(str(root / "tmp"), "/tmp", True),
                      bw.Bind(str(root / "home"), "/root", True)]
        binds += [bw.Bind(str(Path(m.source).absolute()), PathMap.check_absolute(m.target),
                          m.writable) for m in self.mounts]
        return binds

    async def _launch(self) -> None:
        """Start bwrap (or the bare driver) and wait for the driver's hello."""
        loop = asyncio.get_running_loop()
        lsock = None
        if self._isolated:  # the confined worker's direct channel (direct_exec_offer)
            self._direct_dir, lsock = direct_listener()
        extra_env = {"AHE_DRIVER_FD": str(lsock.fileno())} if lsock is not None else {}
        record_fd = os.open(self.root_dir / "logs" / "exec", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        extra_env["AHE_RECORD_FD"] = str(record_fd)
        fds = (record_fd,) + ((lsock.fileno(),) if lsock is not None else ())
        if self._isolated:
            python, _ = bw.jail_python()
            argv = bw.bwrap_argv(bw.find_bwrap(), self._binds(), [python, "-I", "-S", "-c", _BOOT],
                                 network=self.network, as_pid_1=True)
            extra_env["AHE_DRIVER_INIT"] = "1"
            cwd = "/"
        else:
            argv, cwd = [sys.executable, "-I", "-S", "-c", _BOOT], str(self.app_dir)
        with open(self.root_dir / "driver.log", "ab") as errf:
            try:  # a jail dies with its starter, even one killed mid-launch (local_orphans)
                self._proc = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf, cwd=cwd,
                    env={"PATH": bw.DEFAULT_PATH, "LANG": "C.UTF-8", **orphans.owner_env(), **extra_env},
                    start_new_session=True, preexec_fn=orphans.die_with_parent() if self._isolated else None,
                    pass_fds=fds)
            except OSError as e:
                raise SandboxError(f"cannot start the sandbox ({e}); {bw.INSTALL_HINT}") from e
            finally:
                os.close(record_fd)
                if lsock is not None:
                    lsock.close()  # the driver holds it now
        self._finalizer = weakref.finalize(self, _emergency_cleanup, self._proc, self._owned_root, self._direct_dir)
        self._ready = loop.create_future()
        self._rt, _ = await loop.connect_read_pipe(
            lambda: _DriverProtocol(self._on_message, self._on_eof), self._proc.stdout)
        self._wt, _ = await loop.connect_write_pipe(asyncio.Protocol, self._proc.stdin)
        self._wt.write(json.dumps(_DRIVER_PATH.read_text()).encode() + b"\n")
        try:
            await asyncio.wait_for(self._ready, 60)
        except asyncio.TimeoutError:
            raise SandboxError("the sandbox did not start within 60 s; the machine may be "
                               "overloaded — retry with fewer trials in parallel") from None

    def _on_message(self, msg: dict) -> None:
        if msg.get("ready"):
            self._driver_pid = _driver_host_pid(self._proc, self._isolated)
            if not self._ready.done():
                self._ready.set_result(msg)
            return
        fut = self._pending.get(msg.get("id"))
        if fut is not None and not fut.done():
            fut.set_result(msg)

    def _on_eof(self) -> None:
        if self._state == "stopped":
            return
        tail = _tail(self.root_dir / "driver.log")
        if self._ready is not None and not self._ready.done():
            how = "bubblewrap could not start the sandbox" if self._isolated else \
                "the sandbox driver could not start"
            self._dead = f"{how}: {tail or 'no message'}; {bw.INSTALL_HINT}"
            self._ready.set_exception(SandboxError(self._dead))
        else:
            self._dead = (f"the sandbox died (its driver exited: {tail or 'no message'}); its "
                          "processes and /tmp are gone — stop it and start a new sandbox")
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(SandboxError(self._dead))

    async def stop(self) -> None:
        """Kill every process of the sandbox and remove what it owns. Idempotent."""
        if self._state == "stopped":
            return
        self._state = "stopped"
        await self._shutdown()

    async def _shutdown(self) -> None:
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(SandboxError("the sandbox was stopped while this call ran"))
        proc = self._proc
        if proc is not None:
            init_fd = bw.init_pidfd(proc.pid) if self._isolated and proc.poll() is None else None
            if self._wt is not None:
                self._wt.close()  # EOF: the driver kills its sessions and exits; bwrap follows
            delay, deadline = 0.001, time.monotonic() + 3
            while proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.05)
            if proc.poll() is None:
                proc.kill()
                await asyncio.to_thread(proc.wait)
            if init_fd is not None:
                await _wait_readable(init_fd, max(0.5, deadline - time.monotonic()))
                os.close(init_fd)
            if self._rt is not None:
                self._rt.close()
            remove_spares(self.root_dir / AGENT_LOGS / "exec")  # jail gone; a killed driver left them
        if self._finalizer is not None:
            self._finalizer.detach()
        if self._owned_root:
            await asyncio.to_thread(shutil.rmtree, self._owned_root, True)
        if self._direct_dir:
            shutil.rmtree(self._direct_dir, True)
            self._direct_dir = None

    async def __aenter__(self) -> LocalSandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------------ commands

    def direct_exec_offer(self) -> dict[str, Any] | None:
        """What a confined worker needs to run commands through the driver itself (no hop through
        this process; ahe/confine/direct.py): the driver's socket on the host, the first command
        number it may use, and what `exec` adds to every command. None without bwrap. Call
        `direct_exec_done` when the worker is gone, before this sandbox runs commands again."""
        if not self._direct_dir or self._state != "running" or self._dead:
            return None
        return {"socket": os.path.join(self._direct_dir, "driver.sock"), "next": next(self._exec_numbers),
                "workdir": self.workdir, "env": self._command_env(None), "max_output_bytes": self.max_output_bytes}

    def direct_exec_done(self) -> None:
        """Number the next command after the last one a direct channel ran (its output files)."""
        self._exec_numbers = itertools.count(next_exec_number(self.root_dir / "logs" / "exec"))

    async def _call(self, req: dict, wait: float | None = None) -> dict:
        if self._state != "running":
            raise SandboxError("the sandbox is not running: call start() first (and not after "
                               "stop())")
        if self._dead:
            raise SandboxError(self._dead)
        rid = next(self._ids)
        req["id"] = rid
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            self._wt.write(json.dumps(req, separators=(",", ":")).encode() + b"\n")
            return await self._answer(fut, wait)
        except asyncio.TimeoutError:
            raise SandboxError(f"the sandbox did not answer within {wait:.0f} s; it is stuck — "
                               "stop it and start a new one") from None
        except asyncio.CancelledError:
            if req["op"] == "exec" and self._state == "running" and not self._dead:
                self._wt.write(json.dumps({"op": "cancel", "id": 0, "target": rid}).encode()
                               + b"\n")
            raise
        finally:
            self._pending.pop(rid, None)

    async def _answer(self, fut: asyncio.Future, wait: float | None) -> dict:
        """The driver's answer; every second without one, a look at whether the driver can still
        answer at all (stopped or traced: nothing will come, so say so now, not at the timeout)."""
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            step = _WATCH_SEC if deadline is None else min(_WATCH_SEC, max(0.0, deadline - time.monotonic()))
            done, _ = await asyncio.wait((fut,), timeout=step)
            if done:
                return fut.result()
            if deadline is not None and time.monotonic() >= deadline:
                raise asyncio.TimeoutError
            why = self._driver_stopped()
            if why:
                self._dead = why
                for other in self._pending.values():
                    if not other.done():
                        other.set_exception(SandboxError(why))
                raise SandboxError(why)

    def _driver_stopped(self) -> str | None:
        """A sentence when the driver's process is stopped (SIGSTOP) or stopped by a tracer."""
        if self._driver_pid is None:
            return None
        try:
            with open(f"/proc/{self._driver_pid}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            return None
        state = raw[raw.rfind(b")") + 2:][:1]
        if state in (b"T", b"t"):
            return ("the sandbox's driver was stopped (by a signal or a tracer) and cannot answer; the "
                    "trial's sandbox is void — stop it and start a new one")
        return None

    async def kill_processes(self) -> int:
        """End every process of the sandbox but its driver (the agent's phase is over): in the
        jail, every process of its pid namespace, however it was started. How many there were."""
        resp = await self._call({"op": "killall"}, wait=60)
        if "error" in resp:
            raise SandboxError(f"the sandbox could not end its processes: {resp['error']}")
        return int(resp.get("killed", 0))

    async def exec(
        self,
        command: str,
        *,
        timeout: float | None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        background: bool = False,
    ) -> ExecResult:
        """Run `bash -c command`; see the Sandbox protocol. Timeout -> exit 124, group killed."""
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout}")
        paths = self._require_paths()
        name = f"{next(self._exec_numbers):04d}"
        host_out = self.root_dir / "logs" / "exec" / f"{name}.stdout"  # AHE's record of it
        host_err = host_out.with_suffix(".stderr")
        if self._isolated:
            out, err = f"/logs/exec/{name}.stdout", f"/logs/exec/{name}.stderr"
            run_cwd = paths.normalize(cwd or self.workdir, base=self.workdir, allow_dotdot=True)
        else:
            view = self.root_dir / AGENT_LOGS / "exec"
            out, err = str(view / f"{name}.stdout"), str(view / f"{name}.stderr")
            inside = paths.normalize(cwd or self.workdir, base=self.workdir, allow_dotdot=True)
            run_cwd = paths.host(inside)[0] or inside
        req = {"op": "exec", "argv": ["bash", "-c", command], "cwd": run_cwd,
               "env": self._command_env(env), "out": out, "err": err, "timeout": timeout,
               "background": background}
        t0 = time.monotonic()
        resp = await self._call(req, None if (background or timeout is None) else timeout + 30)
        if "error" in resp:
            raise SandboxError(f"the sandbox could not run the command: {resp['error']}")
        duration = time.monotonic() - t0
        stdout = stderr = ""
        if not background:
            stdout, stderr = await read_outputs(host_out, host_err, out, err,
                                                self.max_output_bytes)
        return ExecResult(exit_code=resp["exit_code"], stdout=stdout, stderr=stderr,
                          timed_out=resp["timed_out"], duration_sec=duration,
                          background=background, stdout_path=out, stderr_path=err)

    def _command_env(self, extra: dict[str, str] | None) -> dict[str, str]:
        if self._isolated:
            env = {"PATH": bw.DEFAULT_PATH, "HOME": "/root", "TMPDIR": "/tmp"}
        else:
            env = {"PATH": os.environ.get("PATH") or bw.DEFAULT_PATH,
                   "HOME": str(self.root_dir / "home"), "TMPDIR": str(self.root_dir / "tmp")}
        env["LANG"] = "C.UTF-8"
        env.update(self.env)
        env.update(extra or {})
        return {str(k): str(v) for k, v in env.items()}

    # --------------------------------------------------------------------------- files

    def _require_paths(self) -> PathMap:
        if self._state != "running" or self._paths is None:
            raise SandboxError("the sandbox is not running: call start() first (and not after "
                               "stop())")
        return self._paths

    async def _file_call(self, req: dict, path: str) -> dict:
        resp = await self._call(req)
        if "errno" in resp:
            code = resp["errno"]
            if req["op"] == "write" and code in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise SandboxPathError(self._read_only_message(path))
            raise OSError(code or errno.EIO, resp["error"], path)
        return resp

    def _read_only_message(self, path: str) -> str:
        writable = ", ".join(self._paths.writable_targets())
        return f"{path} is read-only in the sandbox; only {writable} (and below) can be written"

    async def read_file(self, path: str) -> bytes:
        paths = self._require_paths()
        inside = paths.normalize(path, base=self.workdir)
        host, _, safe = paths.host(inside)
        if host is not None and safe:
            return await asyncio.to_thread(read_regular, host, inside)
        resp = await self._file_call({"op": "read", "path": inside}, inside)
        return base64.b64decode(resp["data"])

    async def write_file(self, path: str, data: bytes) -> None:
        paths = self._require_paths()
        inside = paths.normalize(path, base=self.workdir)
        host, writable, safe = paths.host(inside)
        if host is not None and not writable:
            raise SandboxPathError(self._read_only_message(inside))
        if host is not None and safe:
            await asyncio.to_thread(write_host, host, bytes(data), inside)
            return
        await self._file_call({"op": "write", "path": inside, "kind": "file",
                               "data": base64.b64encode(data).decode()}, inside)

    async def upload(self, local: Path, remote: str) -> None:
        """Copy a host file to the file `remote`, or a host folder's content into `remote`."""
        local = Path(local)
        if not local.exists():
            raise FileNotFoundError(errno.ENOENT, "no such file or folder to upload", str(local))
        paths = self._require_paths()
        inside = paths.normalize(remote, base=self.workdir)
        host, writable, safe = paths.host(inside)
        if host is not None and not writable:
            raise SandboxPathError(self._read_only_message(inside))
        if not local.is_dir():
            if host is not None and safe:
                await asyncio.to_thread(copy_file, str(local), host, inside)
            else:
                data = await asyncio.to_thread(local.read_bytes)
                await self._file_call({"op": "write", "path": inside, "kind": "file",
                                       "mode": local.stat().st_mode & 0o7777,
                                       "data": base64.b64encode(data).decode()}, inside)
            return
        if host is not None and safe and (
                not self._isolated or await asyncio.to_thread(upload_tree_is_safe, local, host)):
            await asyncio.to_thread(shutil.copytree, local, host, symlinks=True,
                                    dirs_exist_ok=True)
            return
        data = await asyncio.to_thread(tar_folder, local)
        await self._file_call({"op": "write", "path": inside, "kind": "tar",
                               "data": base64.b64encode(data).decode()}, inside)

    async def download(self, remote: str, local: Path) -> None:
        """Copy the file `remote` to the host file `local`, or a folder's content into `local`."""
        paths = self._require_paths()
        local = Path(local)
        inside = paths.normalize(remote, base=self.workdir)
        host, _, safe = paths.host(inside)
        if host is not None and safe:
            if os.path.isdir(host):
                await asyncio.to_thread(shutil.copytree, host, local, symlinks=True,
                                        dirs_exist_ok=True)
            else:
                await asyncio.to_thread(copy_file, host, str(local), inside)
            return
        resp = await self._file_call({"op": "read", "path": inside, "tar": True}, inside)
        data = base64.b64decode(resp["data"])
        if resp["kind"] == "dir":
            await asyncio.to_thread(extract_untrusted_tar, data, local)
        else:
            await asyncio.to_thread(write_host, str(local), data)
            local.chmod(resp.get("mode", 0o644) & 0o777)


def _driver_host_pid(proc: subprocess.Popen | None, isolated: bool) -> int | None:
    """The driver's pid on the host: bwrap's only child in the jail (its pid 1), else bwrap's
    own process in the no-isolation fallback (there the driver is the process we started)."""
    if proc is None:
        return None
    if not isolated:
        return proc.pid
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            kids = f.read().split()
        return int(kids[0]) if len(kids) == 1 else None
    except (OSError, ValueError):
        return None


async def _wait_readable(fd: int, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.add_reader(fd, lambda: done.done() or done.set_result(None))
    try:
        await asyncio.wait_for(done, timeout)
    except asyncio.TimeoutError:
        pass  # the kernel is slow to tear the namespace down; nothing more we can do
    finally:
        loop.remove_reader(fd)


def _tail(path: Path, size: int = 2000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - size))
            return f.read().decode("utf-8", "replace").strip().replace("\n", " | ")
    except OSError:
        return ""


def _warn(message: str) -> None:
    """Loud, once per process in the log, every time through `warnings` (filters dedupe)."""
    if message not in _warned:
        _warned.add(message)
        log.warning(message)
    warnings.warn(message, UnconfinedWarning, stacklevel=3)
