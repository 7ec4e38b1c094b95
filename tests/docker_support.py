"""Pytest fixtures for tests that need a real Docker engine (DESIGN.md §10).

* `docker_engine` (session): a docker client for a running engine. An engine that already
  answers (DOCKER_HOST, else the default socket) is used as is. Otherwise, when we are root
  and `dockerd` is installed (`.ci/setup-docker.sh` installs it), dockerd is started in the
  background with the flags an offline machine needs (no iptables, no bridge; overlay2
  storage, else vfs) and stopped again when the last test process that used it finishes.
  With DOCKER_HOST=unix:///some/dir/docker.sock the started dockerd is a private one: it
  listens there and keeps its data, state and pid file in that folder.
  Tests are skipped, with the reason, only when no engine can be had at all — or fail
  instead when AHE_REQUIRE_DOCKER=1 (set it in CI, so a broken engine cannot hide).
* `base_image` (session): the tag of the offline busybox+bash base image, imported once and
  then cached on the engine (`ahe.sandbox.docker_images.build_offline_base_image`).

Under `pytest -n auto` every xdist worker has its own session: a file lock lets only one of
them start dockerd or import the image, and one file per user tells the last one out that
it should stop the dockerd a fixture started (never one it found running).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ahe.sandbox.docker_images import OFFLINE_BASE_IMAGE, build_offline_base_image

DEFAULT_SOCKET = "unix:///var/run/docker.sock"
# Containers here get no network: no iptables, no bridge. overlay2 creates containers about
# ten times faster than vfs; vfs works everywhere (e.g. when /var/lib/docker is on overlayfs).
_COMMON_ARGS = ["--iptables=false", "--ip6tables=false", "--bridge=none"]
DOCKERD_ARG_SETS = [
    ["--storage-driver=overlay2", *_COMMON_ARGS],
    ["--storage-driver=vfs", *_COMMON_ARGS],
]
START_TIMEOUT_SEC = 60.0


def _docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET


def _state_dir() -> Path:
    """Bookkeeping of the fixture, one folder per engine address."""
    key = hashlib.sha256(_docker_host().encode()).hexdigest()[:12]
    path = Path(os.environ.get("AHE_LOCK_DIR") or tempfile.gettempdir()) / f"ahe-test-dockerd-{key}"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _locked() -> Iterator[Path]:
    state = _state_dir()
    with open(state / "lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield state
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _client_or_none(timeout: int = 30) -> Any:
    import docker

    try:
        client = docker.from_env(timeout=timeout, max_pool_size=64)
        client.ping()
        return client
    except Exception:
        return None


def _pid_alive(pid: int) -> bool:
    """True for a running process (a zombie, e.g. another worker's exited child, is dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _is_dockerd(pid: int) -> bool:
    """True when `pid` is alive and is a dockerd (guards against a reused pid)."""
    if not _pid_alive(pid):
        return False
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "dockerd"
    except OSError:
        return True


def _unavailable(reason: str) -> None:
    if os.environ.get("AHE_REQUIRE_DOCKER") == "1":
        pytest.fail(f"AHE_REQUIRE_DOCKER=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _private_args(host: str) -> list[str]:
    """Flags that give a dockerd on a non-default unix socket its own folders."""
    if host == DEFAULT_SOCKET:
        return []
    if not host.startswith("unix://"):
        _unavailable(f"no Docker engine answers at DOCKER_HOST={host} and the tests only "
                     "start one on a unix socket")
    root = Path(host[len("unix://"):]).parent
    root.mkdir(parents=True, exist_ok=True)
    return [
        f"--host={host}",
        f"--data-root={root / 'data'}",
        f"--exec-root={root / 'exec'}",
        f"--pidfile={root / 'dockerd.pid'}",
    ]


def _start_dockerd(state: Path) -> int:
    """Start dockerd in the background (own session, log in `state`); return its pid."""
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        _unavailable("no Docker engine is reachable and dockerd is not installed "
                     "(run `bash .ci/setup-docker.sh` as root)")
    if os.geteuid() != 0:
        _unavailable("no Docker engine is reachable and only root can start dockerd here")
    extra = os.environ.get("AHE_DOCKERD_ARGS")
    arg_sets = [extra.split()] if extra else DOCKERD_ARG_SETS
    private = _private_args(_docker_host())
    log_path = state / "dockerd.log"
    for args in arg_sets:
        with open(log_path, "ab") as log:
            log.write(f"\n--- dockerd {' '.join(args + private)}\n".encode())
            process = subprocess.Popen(
                [dockerd, *args, *private],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_SEC
        while time.monotonic() < deadline and process.poll() is None:
            if _client_or_none(timeout=5) is not None:
                return process.pid
            time.sleep(0.2)
        if process.poll() is None:
            _stop_dockerd(process.pid)
        else:
            process.wait()
    tail = log_path.read_text(errors="replace").splitlines()[-15:]
    _unavailable("dockerd did not become ready; its log ends with:\n" + "\n".join(tail))
    raise AssertionError("unreachable")


def _stop_dockerd(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _pid_alive(pid):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    if _pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)  # reap it when it is our child (no zombie left behind)


def _read_state(state: Path) -> dict[str, Any]:
    try:
        return json.loads((state / "state.json").read_text())
    except (OSError, ValueError):
        return {}


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Any]:
    """A docker client for a running engine (started for the test run when needed)."""
    try:
        import docker  # noqa: F401
    except ImportError:
        _unavailable("the docker Python package is not installed")
    me = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    with _locked() as state:
        client = _client_or_none()
        if client is None:
            pid = _start_dockerd(state)
            (state / "state.json").write_text(json.dumps({"dockerd_pid": pid}))
            client = _client_or_none()
            if client is None:
                _unavailable("dockerd started but the docker client cannot reach it")
        (state / "users").mkdir(exist_ok=True)
        (state / "users" / me).write_text(str(os.getpid()))
    try:
        yield client
    finally:
        with _locked() as state:
            (state / "users" / me).unlink(missing_ok=True)
            others = 0
            for entry in (state / "users").iterdir():
                text = entry.read_text().strip()
                if text.isdigit() and _pid_alive(int(text)):
                    others += 1
                else:
                    entry.unlink(missing_ok=True)
            pid = _read_state(state).get("dockerd_pid")
            if not others and isinstance(pid, int) and _is_dockerd(pid):
                client.close()
                _stop_dockerd(pid)
                (state / "state.json").unlink(missing_ok=True)


@pytest.fixture(scope="session")
def base_image(docker_engine: Any) -> str:
    """Tag of the offline busybox+bash test image, imported once and then cached."""
    with _locked():
        return build_offline_base_image(docker_engine, OFFLINE_BASE_IMAGE)
