"""Paths and file transfer for LocalSandbox: map sandbox paths to host paths safely.

Files under the sandbox's binds (/app, /logs, /tmp, /root, mounts) are read and written
directly on the host, which is much faster than going through the jail. The danger is that
the agent controls those folders: a symlink it planted (`/app/x -> /root/secret`) would
make a host-side read follow the link *on the host*, out of the jail. So a host path is only
used when resolving it on the host lands exactly where the lexical path says (no symlink on
the way); anything else goes through the driver inside the jail, where links resolve in the
jail's own view. (A process racing to swap a folder for a link between check and use is not
covered; the jail path is the safe one.)
"""

from __future__ import annotations

import asyncio
import errno
import io
import os
import posixpath
import re
import shutil
import stat
import tarfile
from pathlib import Path, PurePosixPath

from ahe.sandbox.base import SandboxError
from ahe.sandbox.bwrap import Bind


class SandboxPathError(SandboxError):
    """A path the sandbox refuses (`..`, a read-only place): the caller's mistake, raised as a
    SandboxError as the protocol asks, but with kind "sandbox_path" so a runtime can tell it
    from a broken sandbox."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.kind = "sandbox_path"


class PathMap:
    """Sandbox path -> (host path, writable, safe), through the binds, longest target first.

    In fallback mode (`isolated=False`) a path outside every bind *is* the host path.
    """

    def __init__(self, binds: list[Bind], *, isolated: bool) -> None:
        self._binds = sorted(binds, key=lambda b: len(b.target), reverse=True)
        self._isolated = isolated
        self._real = {b.source: os.path.realpath(b.source) for b in binds}

    @staticmethod
    def check_absolute(path: str, *, what: str = "path") -> str:
        p = PurePosixPath(path)
        if not p.is_absolute() or ".." in p.parts:
            raise SandboxPathError(f"{what} {path!r} must be absolute and without '..'")
        return _normpath(str(p))

    @staticmethod
    def normalize(path: str, *, base: str, allow_dotdot: bool = False) -> str:
        """Absolute, normalized sandbox path; relative paths are taken from `base`."""
        if not isinstance(path, str) or not path.strip():
            raise SandboxPathError(f"empty or invalid path {path!r}")
        p = PurePosixPath(path)
        if not allow_dotdot and ".." in p.parts:
            raise SandboxPathError(f"path {path!r} contains '..', which the sandbox refuses; "
                                   "give the path without it")
        if not p.is_absolute():
            p = PurePosixPath(base) / p
        return _normpath(str(p))

    def host(self, inside: str) -> tuple[str | None, bool, bool]:
        """(host path or None, writable, safe to use the host path directly)."""
        for b in self._binds:
            if inside == b.target or inside.startswith(b.target.rstrip("/") + "/"):
                rel = inside[len(b.target):].lstrip("/")
                host = os.path.join(b.source, rel) if rel else b.source
                if not self._isolated:
                    return host, b.writable, True
                real = self._real[b.source]
                expect = os.path.join(real, rel) if rel else real
                return host, b.writable, os.path.realpath(host) == expect
        if not self._isolated:
            return inside, True, True
        return None, False, False

    def writable_targets(self) -> list[str]:
        return sorted(b.target for b in self._binds if b.writable)


def _normpath(p: str) -> str:
    p = posixpath.normpath(p)
    return "/" + p.lstrip("/") if p.startswith("//") else p


def _check_regular(host: str, shown: str) -> None:
    """Refuse folders and special files (reading a FIFO would hang us); errors name `shown`."""
    try:
        st = os.stat(host)
    except OSError as e:
        raise type(e)(e.errno, e.strerror, shown) from None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", shown)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", shown)


def read_regular(host: str, shown: str) -> bytes:
    _check_regular(host, shown)
    with open(host, "rb") as f:
        return f.read()


def write_host(host: str, data: bytes, shown: str | None = None) -> None:
    try:
        os.makedirs(os.path.dirname(host) or ".", exist_ok=True)
        with open(host, "wb") as f:
            f.write(data)
    except OSError as e:
        raise type(e)(e.errno, e.strerror, shown or host) from None


def output_dir_is_safe(exec_dir: Path) -> bool:
    """The agent can replace /logs/exec (not /logs itself, a mount point) by a link; as long
    as it is a real folder, opening a file in it with O_NOFOLLOW stays inside."""
    try:
        return stat.S_ISDIR(os.lstat(exec_dir).st_mode)
    except OSError:
        return False


def remove_spares(exec_dir: Path) -> None:
    """The driver's hidden `.spare-N` output files, made ahead for commands that never came: it
    removes them when it shuts down, but a driver that was killed cannot. unlink never follows
    a link the agent put in their place; a folder under that name is left alone."""
    if not output_dir_is_safe(exec_dir):
        return
    for p in exec_dir.glob(".spare-*"):
        try:
            if not stat.S_ISDIR(os.lstat(p).st_mode):
                os.unlink(p)
        except OSError:
            continue


def reuse_exec_dir(exec_dir: Path) -> int:
    """The number of the next command in a kept root_dir: after any output a previous sandbox
    left there, whose spares (it was killed, say) are removed first."""
    remove_spares(exec_dir)
    numbers = [int(m.group(1)) for p in exec_dir.iterdir()
               if (m := re.fullmatch(r"(\d+)\.std(?:out|err)", p.name))]
    return max(numbers, default=0) + 1


def copy_file(src: str, dst: str, shown: str) -> None:
    """Copy one regular file with its mode (an uploaded script stays executable)."""
    _check_regular(src, shown)
    try:
        os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
        shutil.copy2(src, dst)
    except OSError as e:
        raise type(e)(e.errno, e.strerror, shown) from None


def read_output(host: Path, shown: str, limit: int) -> str:
    """One command's output file as text; head+tail beyond `limit` bytes (the file keeps all)."""
    try:
        fd = os.open(host, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return ""
    except OSError as e:
        return f"[ahe: cannot read {shown}: {e.strerror}]"
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return f"[ahe: {shown} is not a regular file; output not read]"
        if st.st_size <= limit:
            data = f.read()
        else:
            half = limit // 2
            head = f.read(half)
            f.seek(st.st_size - half)
            note = f"\n[... {st.st_size - 2 * half} bytes omitted; full output in {shown} ...]\n"
            data = head + note.encode() + f.read(half)
    return data.decode("utf-8", "replace")


def upload_tree_is_safe(local: Path, host: str) -> bool:
    """True when copying `local` into `host` on the host cannot follow a planted symlink."""
    real_root = os.path.realpath(host)
    for dirpath, dirnames, filenames in os.walk(local):
        rel_dir = os.path.relpath(dirpath, local)
        for name in dirnames + filenames:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if os.path.realpath(os.path.join(host, rel)) != os.path.join(real_root, rel):
                return False
    return True


def tar_folder(local: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(local), arcname=".")
    return buf.getvalue()


def _skip_unsafe(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's 'data' filter (Python >= 3.11.4, pyproject's floor), but skipping (not failing on)
    members that would escape."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


def extract_untrusted_tar(data: bytes, dest: Path) -> None:
    """Unpack an archive the agent could have shaped, never writing outside `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(dest, filter=_skip_unsafe)


async def read_outputs(host_out: Path, host_err: Path, out: str, err: str,
                       limit: int) -> tuple[str, str]:
    """A command's stdout and stderr as text (`out`/`err` are their paths in the sandbox)."""
    if not output_dir_is_safe(host_out.parent):
        note = f"[ahe: {posixpath.dirname(out)} was replaced by a link; output not read]"
        return note, note

    def both() -> tuple[str, str]:
        return read_output(host_out, out, limit), read_output(host_err, err, limit)

    if all(_size(p) <= 1 << 20 for p in (host_out, host_err)):
        return both()  # the common case: cheaper inline than a hop to a thread
    return await asyncio.to_thread(both)


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0
