"""Path confinement for the evolve agent's file tools (enforced, not asked for).

The model names files by their path inside its jail: `/workspace/...` (the harness, the only
place it may write) and `/experiment/...` (the run folder, read-only). A relative path is
relative to `/workspace`. The host paths of those two folders are accepted as well.

- Reads: the path is normalised (`..` may not climb above the root it names), then fully
  resolved (symlinks included); the result must lie inside the workspace or the experiment.
- Writes and deletes: only under the workspace, never `.git/` or `.gitignore`, and never
  through a symlink: every component is opened with `O_NOFOLLOW` relative to the directory
  before it (`openat`), so a link swapped in by the agent's shell between a check and the
  write cannot redirect it.
- Hidden: the run folder's sealed copy of the tasks (their tests and solutions), the held-out
  split and the experiment file that may name it (`HIDDEN_FROM_EVOLVE`). The evolve agent
  learns from the evidence under /experiment/iterations, never from the answers; the shell
  jail masks the same entries (evolve_agent.phase).
"""

from __future__ import annotations

import errno
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

WORKSPACE_MOUNT = "/workspace"
EXPERIMENT_MOUNT = "/experiment"
GIT_NAMES = (".git", ".gitignore", ".gitattributes", ".gitmodules")  # refused at any depth
# entries of the run folder the evolve agent may not read: the sealed tasks hold every verifier
# and reference solution, holdout/ the split no decision may see, experiment.yaml may name it
HIDDEN_FROM_EVOLVE = ("sealed", "holdout", "experiment.yaml")

Root = Literal["workspace", "experiment"]


class PathProblem(Exception):
    """An ordinary problem with a path (missing, a folder, ...); the message is for the model."""


class PathRefused(PathProblem):
    """The path is outside what the tool may touch (a confinement refusal, always recorded)."""


@dataclass(frozen=True)
class Resolved:
    root: Root
    rel: str  # normalised, relative to the root ("" for the root itself)
    host: Path  # the host path (not symlink-resolved)

    @property
    def shown(self) -> str:
        """How the model sees this path."""
        base = WORKSPACE_MOUNT if self.root == "workspace" else EXPERIMENT_MOUNT
        return f"{base}/{self.rel}" if self.rel else base


class Confinement:
    def __init__(self, workspace: Path, experiment: Path | None) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.experiment = Path(os.path.realpath(experiment)) if experiment else None
        # the hidden entries' host paths, once: `hidden` is asked of every entry a list or grep walks
        self._hidden = tuple(str(self.experiment / name) for name in HIDDEN_FROM_EVOLVE) if self.experiment else ()

    # ------------------------------------------------------------------ naming
    def locate(self, path: str) -> Resolved:
        """Map the model's path to (root, relative path); refuse anything outside both roots."""
        p = (path or ".").strip()
        if "\x00" in p:
            raise PathRefused("the path contains a NUL byte")
        prefixes: list[tuple[str, Root]] = [(WORKSPACE_MOUNT, "workspace"), (str(self.workspace), "workspace")]
        if self.experiment is not None:
            prefixes += [(EXPERIMENT_MOUNT, "experiment"), (str(self.experiment), "experiment")]
        if p.startswith("/"):
            for prefix, root in sorted(prefixes, key=lambda x: -len(x[0])):
                if p == prefix or p.startswith(prefix.rstrip("/") + "/"):
                    return self._inside(root, p[len(prefix):], path)
            where = "/workspace and /experiment" if self.experiment is not None else "/workspace"
            raise PathRefused(f"absolute path {path!r} is outside {where}; only those folders are reachable")
        return self._inside("workspace", p, path)

    def _inside(self, root: Root, rest: str, original: str) -> Resolved:
        rel = posixpath.normpath("/" + rest.lstrip("/"))  # "/" + ... : normpath never keeps leading ".."
        raw_parts = [x for x in rest.split("/") if x]
        depth = 0
        for part in raw_parts:  # `..` may not climb above the root at any point
            depth += -1 if part == ".." else (0 if part == "." else 1)
            if depth < 0:
                raise PathRefused(f"path {original!r} climbs out of {self._mount(root)} with '..'; refused")
        rel = rel.lstrip("/")
        if root == "experiment" and rel.split("/", 1)[0] in HIDDEN_FROM_EVOLVE:
            raise PathRefused(f"{EXPERIMENT_MOUNT}/{rel.split('/', 1)[0]} is hidden from the evolve agent (the tasks' "
                              f"tests and solutions, the held-out split); learn from {EXPERIMENT_MOUNT}/iterations")
        base = self.workspace if root == "workspace" else self.experiment
        assert base is not None
        return Resolved(root, rel, base / rel if rel else base)

    def hidden(self, host_path: str) -> bool:
        """Whether a host path found by walking a folder is one of the hidden run-folder entries."""
        return any(host_path == h or host_path.startswith(h + os.sep) for h in self._hidden)

    @staticmethod
    def _mount(root: Root) -> str:
        return WORKSPACE_MOUNT if root == "workspace" else EXPERIMENT_MOUNT

    def _contains(self, real: str) -> bool:
        for base in (self.workspace, self.experiment):
            if base is not None and (real == str(base) or real.startswith(str(base) + os.sep)):
                return True
        return False

    # ------------------------------------------------------------------ reading
    def for_read(self, path: str) -> Resolved:
        """A path that may be read: it and every symlink on the way stay inside the roots."""
        r = self.locate(path)
        real = os.path.realpath(r.host)
        if self.hidden(real):
            raise PathRefused(f"{r.shown} resolves to {real}, hidden from the evolve agent; refused")
        if not self._contains(real):
            raise PathRefused(
                f"{r.shown} resolves to {real}, outside /workspace and /experiment (a symlink points out); refused"
            )
        return Resolved(r.root, r.rel, Path(real))

    def read_bytes(self, path: str, limit: int | None = None) -> tuple[Resolved, bytes]:
        r = self.for_read(path)
        try:
            fd = os.open(r.host, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise _os_message(exc, r.shown) from None
        with os.fdopen(fd, "rb") as f:
            if not _is_regular(f.fileno()):
                raise PathProblem(f"{r.shown} is not a regular file")
            data = f.read(limit) if limit else f.read()
        return r, data

    # ------------------------------------------------------------------ writing
    def for_write(self, path: str) -> Resolved:
        r = self.locate(path)
        if r.root != "workspace":
            raise PathRefused(f"{r.shown} is in the experiment folder, which is read-only; write under /workspace")
        if not r.rel:
            raise PathProblem("the workspace folder itself cannot be written or deleted; name a file inside it")
        hit = next((part for part in r.rel.split("/") if part in GIT_NAMES), None)
        if hit is not None:
            raise PathRefused(f"{r.shown}: {hit} is managed by AHE (history, ignore and attribute rules); refused")
        return r

    def _open_parent(self, r: Resolved, *, create: bool) -> int:
        """An fd of the file's parent folder, reached without following any symlink."""
        parts = r.rel.split("/")
        fd = os.open(self.workspace, os.O_RDONLY | os.O_DIRECTORY)
        walked = []
        try:
            for part in parts[:-1]:
                walked.append(part)
                try:
                    nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise PathProblem(f"{WORKSPACE_MOUNT}/{'/'.join(walked)} does not exist") from None
                    os.mkdir(part, 0o755, dir_fd=fd)
                    nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        what = _link_text(fd, part)
                        raise PathRefused(
                            f"{WORKSPACE_MOUNT}/{'/'.join(walked)} is {what}; writing through symlinks is refused"
                        ) from None
                    raise
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def write_bytes(self, path: str, data: bytes) -> Resolved:
        r = self.for_write(path)
        pfd = self._open_parent(r, create=True)
        name = r.rel.rsplit("/", 1)[-1]
        try:
            try:
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644, dir_fd=pfd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise PathRefused(f"{r.shown} is {_link_text(pfd, name)}; writing through symlinks is refused") from None
                raise _os_message(exc, r.shown) from None
            with os.fdopen(fd, "wb") as f:
                if not _is_regular(f.fileno()):
                    raise PathProblem(f"{r.shown} is not a regular file")
                f.truncate(0)
                f.write(data)
        finally:
            os.close(pfd)
        return r

    def read_for_edit(self, path: str) -> tuple[Resolved, bytes]:
        """Read a workspace file the same way it will be written: no symlink anywhere on the way."""
        r = self.for_write(path)
        pfd = self._open_parent(r, create=False)
        name = r.rel.rsplit("/", 1)[-1]
        try:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=pfd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise PathRefused(f"{r.shown} is {_link_text(pfd, name)}; editing through symlinks is refused") from None
                raise _os_message(exc, r.shown) from None
            with os.fdopen(fd, "rb") as f:
                if not _is_regular(f.fileno()):
                    raise PathProblem(f"{r.shown} is not a regular file")
                return r, f.read()
        finally:
            os.close(pfd)

    def delete(self, path: str) -> Resolved:
        r = self.for_write(path)
        pfd = self._open_parent(r, create=False)
        name = r.rel.rsplit("/", 1)[-1]
        try:
            try:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            except FileNotFoundError:
                raise PathProblem(f"{r.shown} does not exist") from None
            import stat as _stat

            if _stat.S_ISDIR(st.st_mode):
                raise PathProblem(f"{r.shown} is a folder; delete the files in it one by one")
            os.unlink(name, dir_fd=pfd)  # a symlink itself is removed, never its target
        finally:
            os.close(pfd)
        return r


def _is_regular(fd: int) -> bool:
    import stat as _stat

    return _stat.S_ISREG(os.fstat(fd).st_mode)


def _link_text(dir_fd: int, name: str) -> str:
    try:
        return f"a symlink to {os.readlink(name, dir_fd=dir_fd)}"
    except OSError:
        return "not a plain folder"


def _os_message(exc: OSError, shown: str) -> PathProblem:
    if exc.errno == errno.ENOENT:
        return PathProblem(f"{shown} does not exist")
    if exc.errno == errno.EISDIR:
        return PathProblem(f"{shown} is a folder, not a file")
    return PathProblem(f"{shown}: {exc.strerror or exc}")
