"""Temporary folders that never outlive their owner, even one killed with SIGKILL.

Every folder AHE makes under the temporary directory is named `ahe-<kind>-<pid>-<random>`.
The owner removes it on every path it controls (finally blocks, stop()); a process that was
killed outright cannot, so each AHE command first sweeps the folders of owners that are no
longer alive (`sweep_stale`). A pid is only taken for dead when no process has it."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterator

_NAME = re.compile(r"^ahe-[a-z][a-z-]*?-(\d+)-[A-Za-z0-9_]+$")
MIN_AGE_SEC = 2.0  # a folder this young may belong to a process that is still being set up


def make_temp_dir(kind: str) -> Path:
    """A fresh folder `ahe-<kind>-<pid>-…` under the temporary directory, owned by this process."""
    return Path(tempfile.mkdtemp(prefix=f"ahe-{kind}-{os.getpid()}-"))


@contextlib.contextmanager
def temp_dir(kind: str) -> Iterator[Path]:
    """`make_temp_dir` as a context manager: removed on exit, swept after a kill."""
    path = make_temp_dir(kind)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(root: Path | None = None, keep_pids: frozenset[int] = frozenset()) -> list[Path]:
    """Remove the temporary folders whose owning process is gone (except `keep_pids`'); returns them."""
    root = Path(root or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        m = _NAME.match(entry.name)
        if not m or int(m.group(1)) in keep_pids or int(m.group(1)) == os.getpid() or _alive(int(m.group(1))):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or now - entry.stat(follow_symlinks=False).st_mtime < MIN_AGE_SEC:
                continue
        except OSError:
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.exists(entry.path):
            removed.append(Path(entry.path))
    return removed
