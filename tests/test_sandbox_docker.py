"""DockerSandbox against a real Docker engine: exec, limits, files, cleanup guarantees.

The engine and the offline base image come from `tests/docker_support.py`. Processes inside a
container are told apart by a unique `sleep N` (N random per test).
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from docker_support import base_image, docker_engine  # noqa: F401 - fixtures

from ahe.sandbox import Mount, Sandbox, SandboxError
from ahe.sandbox import docker_engine as docker_engine_module
from ahe.sandbox.docker import (
    LABEL_OWNER_HOST,
    LABEL_OWNER_PID,
    LABEL_SANDBOX,
    DockerSandbox,
    cleanup_stale_containers,
    connect,
    engine_status,
    live_container_ids,
)
from ahe.sandbox.docker_images import build_offline_base_image

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parent.parent


def marker() -> int:
    return random.randint(10**6, 10**7)


def container_exists(client: Any, container_id: str) -> bool:
    import docker.errors

    try:
        client.containers.get(container_id)
    except docker.errors.NotFound:
        return False
    return True


@pytest.fixture
async def sandbox(docker_engine: Any, base_image: str):  # noqa: F811
    sb = DockerSandbox(base_image, client=docker_engine)
    await sb.start()
    yield sb
    await sb.stop()


# ---- exec --------------------------------------------------------------------------------------


async def test_exec_separates_streams_keeps_files_and_exit_code(sandbox: DockerSandbox) -> None:
    assert isinstance(sandbox, Sandbox)
    assert sandbox.shell == "bash"
    result = await sandbox.exec("echo out; echo err >&2; echo $BASH_VERSION; exit 3", timeout=30)
    assert result.exit_code == 3
    assert result.stdout.startswith("out\n") and "5." in result.stdout
    assert result.stderr == "err\n"
    assert not result.timed_out and not result.background
    assert result.stdout_path and result.stdout_path.startswith("/logs/exec/")
    assert result.stdout_path.endswith(".stdout") and result.stderr_path.endswith(".stderr")
    assert await sandbox.read_file(result.stdout_path) == result.stdout.encode()
    assert await sandbox.read_file(result.stderr_path) == b"err\n"
    second = await sandbox.exec("true", timeout=30)
    assert second.stdout_path != result.stdout_path


async def test_env_and_cwd(docker_engine: Any, base_image: str) -> None:  # noqa: F811
    async with DockerSandbox(base_image, env={"BASE": "b1"}, client=docker_engine) as sb:
        result = await sb.exec('pwd; echo "$BASE $EXTRA"', timeout=30, env={"EXTRA": "e 2"})
        assert result.stdout == "/app\nb1 e 2\n"
        await sb.exec("mkdir -p /srv/work", timeout=30)
        assert (await sb.exec("pwd", timeout=30, cwd="/srv/work")).stdout == "/srv/work\n"
        missing = await sb.exec("echo never", timeout=30, cwd="/does/not/exist")
        assert missing.exit_code != 0 and missing.stdout == ""
        assert "/does/not/exist" in missing.stderr


async def test_timeout_kills_the_process_group(sandbox: DockerSandbox) -> None:
    n = marker()
    started = time.monotonic()
    result = await sandbox.exec(f"echo before; sleep {n} & sleep {n}; echo never", timeout=1.0)
    assert time.monotonic() - started < 8
    assert result.timed_out and result.exit_code == 124
    assert result.stdout == "before\n"
    survivors = await sandbox.exec(f"ps | grep -c '[s]leep {n}' || true", timeout=30)
    assert survivors.stdout.strip() == "0"
    # The sandbox is still usable afterwards.
    assert (await sandbox.exec("echo ok", timeout=30)).stdout == "ok\n"


async def test_background_processes_persist_across_execs(sandbox: DockerSandbox) -> None:
    n = marker()
    started = time.monotonic()
    bg = await sandbox.exec(
        f"while :; do echo tick >> /tmp/ticks; sleep 0.1; done & sleep {n}", timeout=5,
        background=True,
    )
    assert bg.background and bg.exit_code == 0 and time.monotonic() - started < 5
    # A foreground command may leave a child behind too; the exec still returns at once.
    fg = await sandbox.exec(f"sleep {n + 1} & echo started", timeout=5)
    assert fg.stdout == "started\n" and not fg.timed_out
    await asyncio.sleep(0.6)
    first = int((await sandbox.exec("wc -l < /tmp/ticks", timeout=30)).stdout)
    await asyncio.sleep(0.4)
    second = int((await sandbox.exec("wc -l < /tmp/ticks", timeout=30)).stdout)
    assert second > first > 0
    ps = (await sandbox.exec("ps", timeout=30)).stdout
    assert f"sleep {n}" in ps and f"sleep {n + 1}" in ps


async def test_output_beyond_the_limit_is_head_and_tail(
    docker_engine: Any, base_image: str  # noqa: F811
) -> None:
    async with DockerSandbox(base_image, client=docker_engine, max_output_bytes=1000) as sb:
        result = await sb.exec("seq 1 20000", timeout=30)
        assert result.stdout.startswith("1\n2\n") and result.stdout.endswith("19999\n20000\n")
        assert "bytes not shown; full output in /logs/exec/" in result.stdout
        assert len(result.stdout) < 1300
        full = await sb.read_file(result.stdout_path)
        assert full.decode().splitlines() == [str(i) for i in range(1, 20001)]


async def test_sh_is_used_when_the_image_has_no_bash(docker_engine: Any) -> None:  # noqa: F811
    image = build_offline_base_image(docker_engine, "ahe-offline-base-nobash:1",
                                     include_bash=False)
    async with DockerSandbox(image, client=docker_engine) as sb:
        assert sb.shell == "sh"
        result = await sb.exec("echo $((6 * 7)) in $0", timeout=30)
        assert result.exit_code == 0 and result.stdout == "42 in sh\n"


async def test_sandboxes_run_concurrently(docker_engine: Any, base_image: str) -> None:  # noqa: F811
    boxes = [DockerSandbox(base_image, client=docker_engine) for _ in range(3)]
    try:
        await asyncio.gather(*(b.start() for b in boxes))
        started = time.monotonic()
        results = await asyncio.gather(*(b.exec("sleep 2; hostname", timeout=30) for b in boxes))
        assert time.monotonic() - started < 5.0  # one after the other would take 6 s
        assert len({r.stdout for r in results}) == 3
    finally:
        await asyncio.gather(*(b.stop() for b in boxes))


# ---- isolation and limits ------------------------------------------------------------------------


async def test_network_is_off_by_default(sandbox: DockerSandbox, docker_engine: Any) -> None:  # noqa: F811
    info = docker_engine.api.inspect_container(sandbox.container_id)
    assert info["HostConfig"]["NetworkMode"] == "none"
    devices = await sandbox.exec("tail -n +3 /proc/net/dev | cut -d: -f1", timeout=30)
    assert devices.stdout.split() == ["lo"]
    out = await sandbox.exec("echo hi > /dev/tcp/1.1.1.1/80", timeout=10)
    assert out.exit_code != 0 and "unreachable" in out.stderr.lower()


async def test_cpu_and_memory_limits_are_applied(docker_engine: Any, base_image: str) -> None:  # noqa: F811
    async with DockerSandbox(base_image, cpus=0.5, memory_mb=128, client=docker_engine) as sb:
        host = docker_engine.api.inspect_container(sb.container_id)["HostConfig"]
        assert host["NanoCpus"] == 500_000_000
        assert host["Memory"] == 128 * 1024 * 1024
        assert host["MemorySwap"] == 128 * 1024 * 1024
        assert host["Init"] is True
        seen = await sb.exec(
            "cat /sys/fs/cgroup/memory.max 2>/dev/null"
            " || cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
            timeout=30,
        )
        assert seen.stdout.strip() == str(128 * 1024 * 1024)


async def test_mounts_read_only_and_writable(
    docker_engine: Any, base_image: str, tmp_path: Path  # noqa: F811
) -> None:
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    ro.mkdir()
    rw.mkdir()
    (ro / "given.txt").write_text("given\n")
    mounts = [Mount(source=ro, target="/in"), Mount(source=rw, target="/out", writable=True)]
    async with DockerSandbox(base_image, mounts=mounts, client=docker_engine) as sb:
        assert (await sb.exec("cat /in/given.txt", timeout=30)).stdout == "given\n"
        denied = await sb.exec("echo x > /in/new.txt", timeout=30)
        assert denied.exit_code != 0 and "read-only" in denied.stderr.lower()
        with pytest.raises(OSError):
            await sb.write_file("/in/new.txt", b"x")
        assert (await sb.exec("echo made > /out/made.txt", timeout=30)).exit_code == 0
        await sb.write_file("/out/written.txt", b"written")
        assert (rw / "written.txt").read_bytes() == b"written"
    assert (rw / "made.txt").read_text() == "made\n"


# ---- files -----------------------------------------------------------------------------------


async def test_write_and_read_files(sandbox: DockerSandbox) -> None:
    payload = bytes(range(256)) * 10
    await sandbox.write_file("nested/dir/data.bin", payload)  # relative to /app
    assert await sandbox.read_file("/app/nested/dir/data.bin") == payload
    listing = await sandbox.exec("ls -l /app/nested/dir/data.bin", timeout=30)
    assert str(len(payload)) in listing.stdout
    await sandbox.write_file("/app/nested/dir/data.bin", b"replaced")
    assert await sandbox.read_file("nested/dir/data.bin") == b"replaced"
    await sandbox.exec("ln -s /app/nested/dir/data.bin /tmp/link", timeout=30)
    assert await sandbox.read_file("/tmp/link") == b"replaced"
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("/no/such/file")
    with pytest.raises(IsADirectoryError):
        await sandbox.read_file("/app/nested")
    # The engine would silently replace a folder by the file: refused, the folder is intact.
    with pytest.raises(IsADirectoryError):
        await sandbox.write_file("/app/nested", b"oops")
    with pytest.raises(NotADirectoryError):
        await sandbox.write_file("/app/nested/dir/data.bin/below", b"oops")
    assert await sandbox.read_file("/app/nested/dir/data.bin") == b"replaced"


async def test_upload_and_download_files_and_folders(
    sandbox: DockerSandbox, tmp_path: Path
) -> None:
    src = tmp_path / "src"
    (src / "sub" / "deeper").mkdir(parents=True)
    (src / "a.txt").write_text("alpha\n")
    (src / "sub" / "deeper" / "b.bin").write_bytes(b"\x00\x01beta")
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    (src / "link").symlink_to("a.txt")

    await sandbox.upload(src, "/data/tree")
    check = await sandbox.exec(
        "cat /data/tree/a.txt /data/tree/link && /data/tree/run.sh && "
        "test -L /data/tree/link && stat -c %U /data/tree/a.txt && "
        "ls /data/tree/sub/deeper",
        timeout=30,
    )
    assert check.exit_code == 0, check.stderr
    assert check.stdout == "alpha\nalpha\nran\nroot\nb.bin\n"
    # A folder uploaded onto an existing folder is merged into it.
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "c.txt").write_text("gamma\n")
    await sandbox.upload(extra, "/data/tree")
    assert (await sandbox.exec("ls /data/tree", timeout=30)).stdout.split() == [
        "a.txt", "c.txt", "link", "run.sh", "sub"
    ]
    # A single file goes to exactly the path named.
    await sandbox.upload(src / "a.txt", "/data/single/renamed.txt")
    assert await sandbox.read_file("/data/single/renamed.txt") == b"alpha\n"

    await sandbox.exec("echo made-inside > /data/tree/sub/new.txt", timeout=30)
    back = tmp_path / "back"
    await sandbox.download("/data/tree", back)
    assert (back / "a.txt").read_text() == "alpha\n"
    assert (back / "sub" / "deeper" / "b.bin").read_bytes() == b"\x00\x01beta"
    assert (back / "sub" / "new.txt").read_text() == "made-inside\n"
    assert (back / "link").is_symlink() and os.readlink(back / "link") == "a.txt"
    assert os.access(back / "run.sh", os.X_OK)
    # Downloading into an existing folder merges; a file lands at exactly `local`.
    await sandbox.download("/data/single", back)
    assert (back / "renamed.txt").read_text() == "alpha\n" and (back / "a.txt").exists()
    await sandbox.download("/data/tree/a.txt", tmp_path / "one" / "copy.txt")
    assert (tmp_path / "one" / "copy.txt").read_text() == "alpha\n"
    with pytest.raises(FileNotFoundError):
        await sandbox.download("/data/missing", tmp_path / "missing")
    with pytest.raises(FileNotFoundError):
        await sandbox.upload(tmp_path / "nothing-here", "/data/x")


# ---- lifecycle and cleanup ----------------------------------------------------------------------


async def test_stop_removes_the_container_and_is_idempotent(
    docker_engine: Any, base_image: str  # noqa: F811
) -> None:
    sb = DockerSandbox(base_image, client=docker_engine, labels={"purpose": "test"})
    await sb.stop()  # before start: nothing to do
    sb = DockerSandbox(base_image, client=docker_engine, labels={"purpose": "test"})
    await sb.start()
    container_id = sb.container_id
    assert container_id is not None and container_id in live_container_ids()
    labels = docker_engine.api.inspect_container(container_id)["Config"]["Labels"]
    assert labels[LABEL_SANDBOX] == "1" and labels[LABEL_OWNER_PID] == str(os.getpid())
    assert labels["purpose"] == "test"
    await sb.stop()
    await sb.stop()
    assert not container_exists(docker_engine, container_id)
    assert container_id not in live_container_ids()
    with pytest.raises(SandboxError):
        await sb.exec("true", timeout=5)


async def test_container_is_removed_when_the_body_raises(
    docker_engine: Any, base_image: str  # noqa: F811
) -> None:
    seen: list[str] = []
    with pytest.raises(RuntimeError, match="boom"):
        async with DockerSandbox(base_image, client=docker_engine) as sb:
            assert sb.container_id is not None
            seen.append(sb.container_id)
            raise RuntimeError("boom")
    assert seen and not container_exists(docker_engine, seen[0])

    sb = DockerSandbox(base_image, client=docker_engine)
    try:
        await sb.start()
        seen.append(sb.container_id or "")
        await sb.exec("exit 1", timeout=5)
        raise ValueError("the trial failed")
    except ValueError:
        pass
    finally:
        await sb.stop()
    assert not container_exists(docker_engine, seen[1])


async def test_cancelled_exec_kills_the_command(sandbox: DockerSandbox) -> None:
    n = marker()
    task = asyncio.ensure_future(sandbox.exec(f"sleep {n}", timeout=60))
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    left = await sandbox.exec(f"ps | grep -c '[s]leep {n}' || true", timeout=30)
    assert left.stdout.strip() == "0"


def test_stale_containers_of_dead_owners_are_removed(
    docker_engine: Any, base_image: str  # noqa: F811
) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    import socket

    def labelled(pid: int) -> str:
        container = docker_engine.containers.create(
            base_image, ["sleep", "60"], network_mode="none",
            labels={LABEL_SANDBOX: "1", LABEL_OWNER_PID: str(pid),
                    LABEL_OWNER_HOST: socket.gethostname()},
        )
        return container.id

    stale = labelled(dead.pid)
    alive = labelled(os.getpid())
    try:
        cleanup_stale_containers(docker_engine)
        assert not container_exists(docker_engine, stale)
        assert container_exists(docker_engine, alive)
    finally:
        for cid in (stale, alive):
            if container_exists(docker_engine, cid):
                docker_engine.api.remove_container(cid, force=True)


CRASHER = textwrap.dedent(
    """
    import asyncio, signal, sys
    from ahe.sandbox.docker import DockerSandbox

    # Ctrl-C as at a terminal: a test run started as a background job of a non-interactive shell ignores SIGINT,
    # and a child inheriting that would get no KeyboardInterrupt from Python
    signal.signal(signal.SIGINT, signal.default_int_handler)

    async def main():
        sb = DockerSandbox(sys.argv[1])
        await sb.start()
        print(sb.container_id, flush=True)
        if sys.argv[2] != "exit":
            await asyncio.sleep(120)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("how", ["exit", "SIGTERM", "SIGINT"])
def test_containers_are_removed_when_the_owner_exits_or_is_killed(
    docker_engine: Any, base_image: str, how: str  # noqa: F811
) -> None:
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-c", CRASHER, base_image, how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        container_id = proc.stdout.readline().strip()
        assert container_id, proc.stderr.read() if proc.stderr else ""
        if how != "exit":
            assert container_exists(docker_engine, container_id)
            proc.send_signal(getattr(signal, how))
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not container_exists(docker_engine, container_id)


# ---- engine -----------------------------------------------------------------------------------


def test_engine_status_reports_the_running_engine(docker_engine: Any) -> None:  # noqa: F811
    ok, message = engine_status()
    assert ok, message
    assert "Docker engine" in message and "API" in message


def test_unreachable_engine_is_a_sandbox_error_saying_how_to_start_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"unix://{tmp_path}/no-docker.sock"
    with pytest.raises(SandboxError, match="unreachable.*dockerd"):
        connect(url)
    monkeypatch.setenv("DOCKER_HOST", url)
    ok, message = engine_status()
    assert not ok and "dockerd" in message and "DOCKER_HOST" in message


async def test_start_fails_clearly_without_engine_or_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docker_engine: Any  # noqa: F811
) -> None:
    with pytest.raises(SandboxError, match="not on the Docker engine"):
        await DockerSandbox("ahe-test/does-not-exist:none", client=docker_engine).start()
    monkeypatch.setattr(docker_engine_module, "_client", None)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(SandboxError, match="unreachable"):
        await DockerSandbox("whatever").start()
