"""The jail's /etc masks follow the host's /etc within one long-lived process: a root-only file
removed from /etc after the masks were computed must not break the next jail (bwrap would fail
making its mount point: every sandbox of a test worker failed so in CI once another test's
planted /etc secret was removed), and one added later must be masked in the next jail."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from ahe.sandbox.local import LocalSandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None or os.geteuid() != 0,
                                reason="needs bubblewrap and root (it writes a root-only file into /etc)")


def _secret(token: str) -> Path:
    path = Path(f"/etc/ahe-mask-test-{uuid.uuid4().hex[:8]}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, token.encode())
    os.close(fd)
    return path


async def _cat(tmp_path: Path, name: str, path: Path) -> str:
    async with LocalSandbox(tmp_path / name, isolation="bwrap") as box:
        return (await box.exec(f"cat {path} 2>&1; echo end", timeout=20)).stdout


async def test_a_removed_etc_file_does_not_break_the_next_jail_and_a_new_one_is_masked(tmp_path):
    token = uuid.uuid4().hex
    first = _secret(token)
    try:
        assert token not in await _cat(tmp_path, "a", first)  # masked: reads as empty
    finally:
        first.unlink()
    assert "No such file" in await _cat(tmp_path, "b", first)  # the jail starts; the file is just gone
    later = _secret(token)
    try:
        assert token not in await _cat(tmp_path, "c", later)  # added after the first walk: masked too
    finally:
        later.unlink()
