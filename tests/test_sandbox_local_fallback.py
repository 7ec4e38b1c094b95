"""LocalSandbox without bubblewrap: plain host subprocesses, loudly marked as not isolated.

These run everywhere (no bwrap needed); the missing-bwrap cases are simulated by replacing
the self-check, so they are deterministic on machines that do have bubblewrap.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

import pytest

from ahe.sandbox import SandboxError
from ahe.sandbox import bwrap as bwrap_module
from ahe.sandbox.local import LocalSandbox, SandboxPathError


def marker() -> int:
    return random.randint(10**8, 10**9)


def alive(n: int) -> bool:
    needle = f"sleep\0{n}".encode()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if needle in f.read():
                        return True
            except OSError:
                pass
    return False


def wait_alive(n: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if alive(n):
            return True
        time.sleep(0.01)
    return False


def wait_gone(n: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(n):
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap_module, "check", lambda: (False, "bwrap is missing (simulated)"))


async def test_isolation_none_works_and_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    box = LocalSandbox(tmp_path / "app", root_dir=tmp_path / "root", isolation="none")
    with pytest.warns(RuntimeWarning, match="NO isolation"):
        await box.start()
    try:
        assert box.isolated is False
        app = str(tmp_path / "app")
        r = await box.exec("pwd; echo $HOME $TMPDIR; echo e >&2; exit 2", timeout=10)
        assert r.exit_code == 2 and r.stderr == "e\n"
        assert r.stdout.splitlines() == [app, f"{tmp_path}/root/home {tmp_path}/root/tmp"]
        assert r.stdout_path == f"{tmp_path}/root/sandbox-logs/exec/0001.stdout"  # host paths here
        assert Path(r.stdout_path).read_text() == r.stdout
        assert (await box.exec("pwd", timeout=10, cwd="/app")).stdout == app + "\n"
        assert "sk-must-not-leak" not in (await box.exec("env", timeout=10)).stdout

        await box.write_file("/app/x.txt", b"x")  # /app and /logs are still mapped
        assert (tmp_path / "app" / "x.txt").read_bytes() == b"x"
        assert await box.read_file("x.txt") == b"x"
        assert await box.read_file(str(tmp_path / "app" / "x.txt")) == b"x"  # literal path
        with pytest.raises(SandboxPathError):
            await box.read_file("/app/../x.txt")

        n = marker()
        await box.exec(f"nohup sleep {n} >/dev/null 2>&1 &", timeout=10)
        assert wait_alive(n), "background processes persist between exec calls"
        t = marker()
        r = await box.exec(f"sleep {t} & wait", timeout=0.5)
        assert (r.exit_code, r.timed_out) == (124, True)
        assert wait_gone(t)
        b = marker()
        r = await box.exec(f"sleep {b}", timeout=10, background=True)
        assert r.background and r.exit_code == 0
        assert wait_alive(b)
    finally:
        await box.stop()
    assert wait_gone(n) and wait_gone(b), "stop() kills what the sandbox started"


async def test_auto_falls_back_without_bwrap(tmp_path: Path, no_bwrap: None) -> None:
    box = LocalSandbox(tmp_path / "app", isolation="auto")
    with pytest.warns(RuntimeWarning, match="NO isolation.*bwrap is missing"):
        await box.start()
    try:
        assert not box.isolated
        assert (await box.exec("echo ok", timeout=10)).stdout == "ok\n"
    finally:
        await box.stop()


async def test_bwrap_required_but_missing_is_an_error(tmp_path: Path, no_bwrap: None) -> None:
    box = LocalSandbox(tmp_path / "app", isolation="bwrap")
    with pytest.raises(SandboxError, match="cannot isolate the sandbox: bwrap is missing"):
        await box.start()


async def test_concurrent_execs_in_fallback(tmp_path: Path) -> None:
    with pytest.warns(RuntimeWarning):
        box = LocalSandbox(tmp_path / "app", isolation="none")
        await box.start()
    try:
        t0 = time.monotonic()
        rs = await asyncio.gather(*(box.exec(f"sleep 0.4; echo {i}", timeout=10)
                                    for i in range(8)))
        assert time.monotonic() - t0 < 3
        assert [r.stdout for r in rs] == [f"{i}\n" for i in range(8)]
    finally:
        await box.stop()


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="isolation"):
        LocalSandbox(tmp_path, isolation="docker")  # type: ignore[arg-type]
    with pytest.raises(SandboxPathError, match="workdir"):
        LocalSandbox(tmp_path, workdir="app")


async def test_calls_before_start_are_refused(tmp_path: Path) -> None:
    box = LocalSandbox(tmp_path / "app")
    with pytest.raises(SandboxError, match="start"):
        await box.exec("true", timeout=5)
    with pytest.raises(SandboxError, match="start"):
        await box.read_file("/app/x")
    await box.stop()  # stopping a never-started sandbox is fine
