"""The driver's spare output files: made after a command answers, renamed to the next
command's output files, never followed when the agent tampers with them, removed at stop()."""

from __future__ import annotations

import asyncio
import os
import signal
import shutil
from pathlib import Path

import pytest

from ahe.sandbox.base import SandboxError
from ahe.sandbox.local import LocalSandbox

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(shutil.which("bwrap") is None,
                       reason="bubblewrap (bwrap) is not installed on this machine"),
]


async def _spares(exec_dir: Path, count: int = 2) -> dict[int, str]:
    """inode -> name of the hidden spares, once the driver has made `count` of them."""
    for _ in range(500):
        found = {p.lstat().st_ino: p.name for p in exec_dir.glob(".spare-*")}
        if len(found) >= count:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"the driver made no spare output files in {exec_dir}")


async def test_spares_become_the_next_commands_files(tmp_path: Path) -> None:
    root = tmp_path / "trial"
    exec_dir = root / "sandbox-logs" / "exec"  # the agent's /logs/exec (AHE's record: root/logs/exec)
    async with LocalSandbox(tmp_path / "app", root_dir=root, isolation="bwrap") as box:
        await box.exec("echo one", timeout=10)
        spares = await _spares(exec_dir)
        r = await box.exec("echo two; echo err >&2; ls /logs/exec", timeout=10)
        assert r.stdout == "two\n0001.stderr\n0001.stdout\n0002.stderr\n0002.stdout\n"
        assert r.stderr == "err\n" and r.stdout_path == "/logs/exec/0002.stdout"
        used = {(exec_dir / f"0002.{s}").stat().st_ino for s in ("stdout", "stderr")}
        assert used == set(spares), "the command's files are the renamed spares"
        assert (await box.exec("true", timeout=10)).stdout == ""  # a spare starts empty
    assert sorted(p.name for p in exec_dir.iterdir()) == [
        "0001.stderr", "0001.stdout", "0002.stderr", "0002.stdout", "0003.stderr", "0003.stdout"]


async def test_a_tampered_spare_is_never_followed(tmp_path: Path) -> None:
    app = tmp_path / "app"
    async with LocalSandbox(app, isolation="bwrap") as box:
        await box.exec("echo keep > /app/target.txt", timeout=10)
        # A background command answers at once; it then swaps the spares made after it
        # answered for a link to an agent file and a FIFO (which would block an open).
        await box.exec("while ! ls /logs/exec/.spare-* >/dev/null 2>&1; do sleep 0.01; done; "
                       "sleep 0.2; cd /logs/exec; set -- .spare-*; rm -f \"$1\" \"$2\"; "
                       "ln -s /app/target.txt \"$1\"; mkfifo \"$2\"; touch /app/tampered",
                       timeout=30, background=True)
        for _ in range(500):
            if (app / "tampered").exists():
                break
            await asyncio.sleep(0.01)
        assert (app / "tampered").exists()
        r = await box.exec("echo out; echo err >&2", timeout=10)
        assert (r.exit_code, r.stdout, r.stderr) == (0, "out\n", "err\n")
        assert (app / "target.txt").read_text() == "keep\n"
        host_out = box.root_dir / "logs" / "exec" / Path(r.stdout_path).name
        assert host_out.is_file() and not host_out.is_symlink()
        assert os.stat(host_out).st_nlink == 1


async def test_a_killed_driver_leaves_no_spare_in_the_trial_folder(tmp_path: Path) -> None:
    """The agent kills everything it can signal: the driver, the jail's pid 1, is not among it
    (issue 33). Killed from outside, its own clean-up never runs, so stop() removes the spares
    (the trial's root ends up in the run)."""
    root = tmp_path / "trial" / "root"
    exec_dir = root / "sandbox-logs" / "exec"
    box = LocalSandbox(tmp_path / "app", root_dir=root, isolation="bwrap")
    await box.start()
    try:
        await box.exec("echo one", timeout=10)
        r = await box.exec("while ! ls /logs/exec/.spare-* >/dev/null 2>&1; do sleep 0.01; done; "
                           "kill -9 -1; kill -9 1; kill -STOP 1; echo survived", timeout=30)
        assert "survived" in r.stdout and (await box.exec("echo alive", timeout=10)).stdout == "alive\n"
        await box.exec("while ! ls /logs/exec/.spare-* >/dev/null 2>&1; do sleep 0.01; done", timeout=30)
        os.kill(box._driver_pid, signal.SIGKILL)
        for _ in range(500):
            if box._proc.poll() is not None:
                break
            await asyncio.sleep(0.01)
        with pytest.raises(SandboxError, match="died"):
            await box.exec("true", timeout=10)
        assert list(exec_dir.glob(".spare-*")), "the killed driver removed its spares itself"
    finally:
        await box.stop()
    assert sorted(p.name for p in exec_dir.iterdir()) == [f"000{i}.{s}" for i in (1, 2, 3, 4) for s in ("stderr", "stdout")]


async def test_spares_a_killed_sandbox_left_in_a_kept_root_are_removed_at_start(tmp_path: Path) -> None:
    root = tmp_path / "root"
    exec_dir = root / "sandbox-logs" / "exec"
    exec_dir.mkdir(parents=True)
    (root / "logs" / "exec").mkdir(parents=True)
    (root / "logs" / "exec" / "0001.stdout").write_text("kept\n")  # AHE's record numbers the commands
    (exec_dir / ".spare-1").touch()
    (exec_dir / ".spare-2").touch()
    (tmp_path / "outside").write_text("not a spare\n")
    (exec_dir / ".spare-3").symlink_to(tmp_path / "outside")  # a link is removed, never followed
    async with LocalSandbox(tmp_path / "app", root_dir=root, isolation="bwrap") as box:
        assert not list(exec_dir.glob(".spare-*"))
        r = await box.exec("echo two", timeout=10)
        assert r.stdout_path == "/logs/exec/0002.stdout"
    assert sorted(p.name for p in exec_dir.iterdir()) == ["0002.stderr", "0002.stdout"]
    assert sorted(p.name for p in (root / "logs" / "exec").iterdir()) == ["0001.stdout", "0002.stderr", "0002.stdout"]
    assert (tmp_path / "outside").read_text() == "not a spare\n"
