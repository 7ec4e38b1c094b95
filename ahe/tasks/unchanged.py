"""A task folder is parsed again only when a file `load_task` reads has changed.

`load_tasks` runs before every rollout of a run (and the decision simulator runs thousands of
rounds), while the task folders stay as they were. What `load_task` reads is task.toml,
instruction.md, whether tests/test.sh and environment/'s files exist, and the folder itself;
each of those paths' stat result (device, inode, mode, size, modification and change time in
ns — the key `ahe.tasks.snapshot` trusts for its digests) is the key. A file rewritten, renamed,
added or removed changes one of them — unless it happens within the same tick of the file
system's clock as the write before it, so a task whose files were modified less than a second
before it was loaded is not kept (git's "racy" index entries, the same rule). A task with `[environment] test_env` (a path resolved
through links outside the folder) is always loaded afresh. Tasks are frozen models, so the
loaded one is shared.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

_PARTS = ("", "task.toml", "instruction.md", "tests", os.path.join("tests", "test.sh"), "environment")
_MEMO: dict[str, tuple[tuple, Any]] = {}  # folder -> (signature when loaded, the task)
_lock = threading.Lock()
RACY_NS = 1_000_000_000  # files modified this recently may change again without a new timestamp


def signature(folder: str) -> tuple:
    out: list[tuple[int, ...] | None] = []
    for rel in _PARTS:
        try:
            st = os.stat(os.path.join(folder, rel))
        except OSError:
            out.append(None)
        else:
            out.append((st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


def load_unchanged(folder: Path, load: Callable[[Path], Any]) -> Any:
    """`load(folder)`, or the task it returned before when none of its files changed since."""
    key = str(folder)
    sig = signature(key)  # taken before loading: a change during the load is seen next time
    with _lock:
        hit = _MEMO.get(key)
    if hit is not None and hit[0] == sig:
        return hit[1]
    task = load(folder)
    settled = all(part is None or part[4] < time.time_ns() - RACY_NS for part in sig)
    if settled and task.environment.test_env is None:
        with _lock:
            if len(_MEMO) > 20_000:
                _MEMO.clear()
            _MEMO[key] = (sig, task)
    return task
