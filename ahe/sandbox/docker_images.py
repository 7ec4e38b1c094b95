"""Images for the docker backend: choose, pull, build and cache them (DESIGN.md §5, §6).

* `ensure_image` turns a task's `[environment] docker_image` and/or `environment/Dockerfile`
  into an image tag that exists on the engine. A Dockerfile is built with its folder as the
  build context and tagged by a hash of that context (`ahe-task-<name>:<sha256[:16]>`), so an
  unchanged task is never built twice and an edited one always is. Concurrent calls for the
  same tag build once (a thread lock plus a file lock, so several processes agree too).
* `build_offline_base_image` makes a small base image without any registry: busybox (all its
  applets) and bash, copied from this machine's own binaries with the libraries `ldd` names,
  imported with `docker import`. Task Dockerfiles can say `FROM` it on an offline machine.

Run `python -m ahe.sandbox.docker_images build-base` to (re)build that base image by hand.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import logging
import os
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ahe.sandbox.base import SandboxError

log = logging.getLogger(__name__)

DOCKERFILE_NAME = "Dockerfile"
TASK_IMAGE_REPO_PREFIX = "ahe-task-"
# Bump the version when the recipe of the base image changes, so caches are not reused.
OFFLINE_BASE_IMAGE = "ahe-offline-base:1"
BUILD_LOG_TAIL_LINES = 30
DEFAULT_BUILD_TIMEOUT_SEC = 600.0

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# When busybox is missing, these host tools (and their libraries) make the base image.
_FALLBACK_TOOLS = (
    "sh cat ls mkdir rm rmdir cp mv ln echo printf sleep timeout setsid kill ps grep sed awk "
    "head tail wc env chmod chown touch tr sort uniq cut find xargs id date true false test "
    "dirname basename readlink realpath stat tee uname hostname pwd mktemp seq diff tar gzip "
    "nproc du df which"
).split()


class ImageBuildError(SandboxError):
    """An image could not be built or pulled; the message carries the tail of the log."""


# ---- locks -----------------------------------------------------------------------------------

_thread_locks: dict[str, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


def _lock_dir() -> Path:
    """Machine-wide lock files (kept on purpose); AHE_LOCK_DIR moves them, e.g. when TMPDIR is private."""
    path = Path(os.environ.get("AHE_LOCK_DIR") or tempfile.gettempdir()) / "ahe-docker-locks"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def image_lock(tag: str) -> Iterator[None]:
    """Hold the lock of one image tag, across threads of this process and across processes."""
    with _thread_locks_guard:
        lock = _thread_locks.setdefault(tag, threading.Lock())
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", tag)
    with lock, open(_lock_dir() / f"{safe}.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ---- choosing an image -----------------------------------------------------------------------


def image_exists(client: Any, image: str) -> bool:
    import docker.errors

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.APIError as exc:
        if getattr(exc, "status_code", None) == 404:
            return False
        raise SandboxError(f"Docker engine failed to inspect image {image!r}: {exc}") from exc
    return True


def ensure_image(
    *,
    image: str | None,
    dockerfile_dir: Path | None,
    client: Any,
    name: str | None = None,
    build_timeout_sec: float | None = DEFAULT_BUILD_TIMEOUT_SEC,
) -> str:
    """Return an image reference present on the engine for a task's environment.

    `image` (the task's `docker_image`) is used as is when the engine has it, pulled when it
    does not. `dockerfile_dir` is a folder holding a `Dockerfile` (the task's `environment/`);
    it is built when there is no `image`, or when pulling `image` failed (offline machines),
    and reused when its content-hash tag already exists. `name` names the tag (default: the
    task folder's name). Raises `ImageBuildError` with the log tail when nothing works.
    """
    dockerfile = dockerfile_dir / DOCKERFILE_NAME if dockerfile_dir is not None else None
    has_dockerfile = dockerfile is not None and dockerfile.is_file()
    if dockerfile_dir is not None and not has_dockerfile and image is None:
        raise ImageBuildError(f"{dockerfile} does not exist: add it or set docker_image.")
    if image is None and not has_dockerfile:
        raise ImageBuildError(
            "the task names no docker_image and has no environment/Dockerfile: "
            "give it one of the two."
        )
    if image is not None:
        if image_exists(client, image):
            return image
        with image_lock(image):
            if image_exists(client, image):
                return image
            try:
                pull_image(client, image)
                return image
            except ImageBuildError as exc:
                if not has_dockerfile:
                    raise
                log.warning("%s Building %s instead.", exc, dockerfile)
    assert dockerfile_dir is not None
    return build_dockerfile(
        client, dockerfile_dir, name=name, build_timeout_sec=build_timeout_sec
    )


def pull_image(client: Any, image: str) -> None:
    """Pull `image`; on failure raise `ImageBuildError` saying how to provide it offline."""
    import docker.errors
    from docker.utils import parse_repository_tag

    repository, tag = parse_repository_tag(image)
    if not tag:
        tag = "latest"
    try:
        client.api.pull(repository, tag=tag)
    except (docker.errors.APIError, docker.errors.DockerException) as exc:
        text = str(getattr(exc, "explanation", None) or exc).strip()
        detail = " ".join(text.split())[:300] or type(exc).__name__
        raise ImageBuildError(
            f"image {image!r} is not on the Docker engine and pulling it failed ({detail}): "
            "load it (`docker load`), build it, or give the task an environment/Dockerfile."
        ) from exc
    if not image_exists(client, image):
        raise ImageBuildError(f"pulling image {image!r} reported success but it is missing.")


# ---- building a Dockerfile -------------------------------------------------------------------


def context_hash(context_dir: Path) -> str:
    """sha256 of a build context: every path, its type, exec bit and content (or link target)."""
    digest = hashlib.sha256()
    root = Path(context_dir)
    entries: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        base = Path(dirpath)
        entries.extend(base / d for d in dirnames)
        entries.extend(base / f for f in sorted(filenames))
    for path in sorted(entries, key=lambda p: p.relative_to(root).as_posix()):
        rel = path.relative_to(root).as_posix()
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            digest.update(b"L\0" + rel.encode() + b"\0" + os.readlink(path).encode() + b"\0")
        elif stat.S_ISDIR(info.st_mode):
            digest.update(b"D\0" + rel.encode() + b"\0")
        elif stat.S_ISREG(info.st_mode):
            executable = b"x" if info.st_mode & 0o111 else b"-"
            digest.update(b"F\0" + rel.encode() + b"\0" + executable + b"\0")
            digest.update(str(info.st_size).encode() + b"\0")
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
    return digest.hexdigest()


def image_name_for(name: str) -> str:
    """A valid repository name (`ahe-task-<name>`) from a task name."""
    slug = re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip("-._") or "task"
    return f"{TASK_IMAGE_REPO_PREFIX}{slug[:100]}"


def task_image_tag(dockerfile_dir: Path, name: str | None = None) -> str:
    """`ahe-task-<name>:<sha256[:16] of the build context>`."""
    dockerfile_dir = Path(dockerfile_dir).resolve()
    if name is None:
        folder = dockerfile_dir.parent if dockerfile_dir.name == "environment" else dockerfile_dir
        name = folder.name
    return f"{image_name_for(name)}:{context_hash(dockerfile_dir)[:16]}"


def build_dockerfile(
    client: Any,
    dockerfile_dir: Path,
    *,
    name: str | None = None,
    build_timeout_sec: float | None = DEFAULT_BUILD_TIMEOUT_SEC,
) -> str:
    """Build `dockerfile_dir/Dockerfile` (context: that folder) once per content hash."""
    tag = task_image_tag(dockerfile_dir, name)
    if image_exists(client, tag):
        return tag
    with image_lock(tag):
        if image_exists(client, tag):
            return tag
        _run_build(client, Path(dockerfile_dir), tag, build_timeout_sec)
    return tag


def _run_build(client: Any, context: Path, tag: str, timeout: float | None) -> None:
    import docker.errors
    import requests

    dockerfile = context / DOCKERFILE_NAME
    log: deque[str] = deque(maxlen=BUILD_LOG_TAIL_LINES)
    error: str | None = None
    started = time.monotonic()
    try:
        stream = client.api.build(
            path=str(context),
            tag=tag,
            rm=True,
            forcerm=True,
            pull=False,
            decode=True,
            timeout=timeout,
            labels={"ahe.task_image": "1"},
        )
        for chunk in stream:
            for line in str(chunk.get("stream", "")).splitlines():
                if line.strip():
                    log.append(line.rstrip())
            if "error" in chunk:
                error = str(chunk.get("error", "")).strip()
                log.append(error)
            if timeout is not None and time.monotonic() - started > timeout:
                error = f"the build took longer than {timeout:.0f}s"
                break
    except (docker.errors.APIError, docker.errors.BuildError) as exc:
        error = str(getattr(exc, "explanation", None) or exc).strip()
    except requests.exceptions.RequestException as exc:
        error = f"the build did not answer in time or the engine went away ({exc})"
    if error is None and not image_exists(client, tag):
        error = "the engine reported no error but the image is missing"
    if error is not None:
        tail = "\n".join(log) or "(no build output)"
        raise ImageBuildError(
            f"building {dockerfile} failed: {error}. Last lines of the build log:\n{tail}"
        )


# ---- an offline base image -------------------------------------------------------------------


def _shared_libraries(binary: str) -> list[str]:
    """Absolute paths of the libraries (and loader) a dynamic executable needs."""
    try:
        out = subprocess.run(
            ["ldd", binary], capture_output=True, text=True, check=False, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    paths: list[str] = []
    for line in out.splitlines():
        match = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if match:
            paths.append(match.group(1))
    return paths


def _add_dir(tar: tarfile.TarFile, name: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    info.mtime = int(time.time())
    tar.addfile(info)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


def _add_symlink(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    info.mode = 0o777
    tar.addfile(info)


def offline_rootfs_tar(*, include_bash: bool = True) -> bytes:
    """A root file system (tar bytes) made of this machine's busybox and bash binaries."""
    files: dict[str, str] = {}  # path in the image -> host path
    links: dict[str, str] = {}
    busybox = shutil.which("busybox")
    if busybox:
        files["bin/busybox"] = busybox
        listing = subprocess.run(
            [busybox, "--list-full"], capture_output=True, text=True, check=False
        ).stdout.split()
        for applet in listing:
            applet = applet.strip("/")
            if applet and applet != "bin/busybox":
                links[applet] = "/bin/busybox"
    else:
        for tool in _FALLBACK_TOOLS:
            host = shutil.which(tool)
            if host:
                files[f"bin/{tool}"] = host
        if "bin/sh" not in files:
            raise ImageBuildError(
                "neither busybox nor a host /bin/sh was found to make the offline base image: "
                "install busybox-static (apt-get install -y busybox-static)."
            )
    if include_bash:
        bash = shutil.which("bash") or "/bin/bash"
        files["bin/bash"] = bash
        links.pop("bin/bash", None)
    for binary in list(files.values()):
        for lib in _shared_libraries(binary):
            files.setdefault(lib.lstrip("/"), lib)
    for path in list(links):
        if path in files:
            del links[path]
    for extra in ("usr/bin/env", "usr/bin/bash"):
        if extra not in files and extra not in links:
            target = "/bin/bash" if extra.endswith("bash") else "/bin/busybox"
            if target.lstrip("/") in files or (busybox and target == "/bin/busybox"):
                links[extra] = target

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        dirs = {"bin", "sbin", "usr", "usr/bin", "usr/sbin", "usr/local", "usr/local/bin",
                "etc", "root", "app", "logs", "var", "home", "dev", "proc", "sys"}
        for path in list(files) + list(links):
            parent = os.path.dirname(path)
            while parent:
                dirs.add(parent)
                parent = os.path.dirname(parent)
        for directory in sorted(dirs):
            _add_dir(tar, directory, 0o700 if directory == "root" else 0o755)
        _add_dir(tar, "tmp", 0o1777)
        _add_dir(tar, "var/tmp", 0o1777)
        for path, host in sorted(files.items()):
            with open(host, "rb") as handle:
                data = handle.read()
            _add_bytes(tar, path, data, 0o755)
        for path, target in sorted(links.items()):
            _add_symlink(tar, path, target)
        shell = "/bin/bash" if include_bash else "/bin/sh"
        _add_bytes(tar, "etc/passwd", f"root:x:0:0:root:/root:{shell}\n".encode())
        _add_bytes(tar, "etc/group", b"root:x:0:\n")
        _add_bytes(tar, "etc/os-release", b'NAME="ahe offline base"\nID=ahe\n')
    return buffer.getvalue()


def build_offline_base_image(
    client: Any, tag: str = OFFLINE_BASE_IMAGE, *, include_bash: bool = True, force: bool = False
) -> str:
    """Import (once) a small base image with busybox + bash, without any registry."""
    if not force and image_exists(client, tag):
        return tag
    with image_lock(tag):
        if not force and image_exists(client, tag):
            return tag
        repository, _, version = tag.rpartition(":")
        if not repository:
            repository, version = tag, "latest"
        data = offline_rootfs_tar(include_bash=include_bash)
        changes = [f"ENV PATH={_PATH}", 'CMD ["/bin/sh"]']
        try:
            client.api.import_image_from_data(
                data, repository=repository, tag=version, changes=changes
            )
        except Exception as exc:  # the SDK raises several kinds here
            raise ImageBuildError(f"importing the offline base image {tag} failed: {exc}") from exc
        if not image_exists(client, tag):
            raise ImageBuildError(f"importing the offline base image {tag} left no image.")
    return tag


def _main(argv: list[str] | None = None) -> int:
    import argparse

    import docker

    parser = argparse.ArgumentParser(prog="python -m ahe.sandbox.docker_images")
    sub = parser.add_subparsers(dest="command", required=True)
    base = sub.add_parser("build-base", help="import the offline busybox+bash base image")
    base.add_argument("--tag", default=OFFLINE_BASE_IMAGE)
    base.add_argument("--force", action="store_true", help="rebuild even if the tag exists")
    args = parser.parse_args(argv)
    client = docker.from_env()
    started = time.monotonic()
    tag = build_offline_base_image(client, args.tag, force=args.force)
    print(f"{tag} ready in {time.monotonic() - started:.2f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
