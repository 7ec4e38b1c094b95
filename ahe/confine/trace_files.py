"""The trace files a worker hands back, written into the trial folder as plain files only.

A worker could name anything (`../result.json`, `verifier/reward.txt`, a link to a task's
tests), so only the files a session writes are accepted — `trajectory.json`, `events.jsonl`
and the same under `sub_agents/<NN-name>/` — each written fresh, never through a link. The
worker's trajectory.json files (the session's and each sub-agent's) are written as
`trajectory.claimed.json`: they are the harness's claims; the trial's trajectory.json files are
rebuilt by the host from the gateway's record (conversation.py).

A hand-over carries only what changed (`TraceShipper`, in the worker): a file the host already
holds comes as `{"at": n, "data": ...}` — its first `n` bytes as handed before, then `data` —
since a session's trace files only grow or rewrite their tail (events.jsonl is appended to,
trajectory.json rewrites its closing lines). The host writes such a tail only into a file it
wrote itself in this session and only past bytes it holds (`TraceSink`); without that, a
worker's every second re-sent and rewrote every file whole, which at 128 sessions at once
cost the host's one event loop more than the model calls (docs/benchmarks.md, section 10).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import stat
from pathlib import Path
from typing import Any

from ahe.confine.conversation import CLAIM_FILE

_ALLOWED = re.compile(r"(?:sub_agents/\d{2,3}-[A-Za-z0-9_.-]{1,80}/)*(?:trajectory\.json|events\.jsonl)")
MAX_TRACE_FILES = 2000


class TraceSink:
    """The trace files of one session on the host, with a cap on their total size (a worker that
    sends ever new `sub_agents/...` files must not fill the host's disk)."""

    def __init__(self, trace_dir: Path, limit_bytes: int) -> None:
        self.trace_dir, self.limit = Path(trace_dir), limit_bytes
        self._sizes: dict[str, int] = {}  # name -> bytes this sink wrote (the file's length now)
        self._stale: set[str] = set()  # names whose last hand-over was refused: no tail fits them

    def write(self, files: dict[str, Any]) -> list[str]:
        """Write what is allowed and fits (whole files, or tails of files written before); return
        the names refused."""
        refused = []
        for name, data in files.items() if isinstance(files, dict) else ():
            tail = isinstance(data, dict)
            at, blob = (data.get("at"), data.get("data")) if tail else (0, data)
            if not isinstance(blob, str) or type(at) is not int or at < 0:
                refused.append(str(name))
                continue
            size = at + len(blob) * 3 // 4
            others = sum(v for k, v in self._sizes.items() if k != name)
            if others + size > self.limit:
                refused.append(f"{name} (over the session's {self.limit >> 20} MB of trace)")
                continue
            if tail and (at > self._sizes.get(name, -1) or name in self._stale):  # only past bytes it holds
                refused.append(f"{name} (a tail at byte {at} of a file the host does not hold)")
                continue
            written = _write_one(self.trace_dir, name, blob, at if tail else None)
            if written is None:
                refused.append(str(name))
            else:
                self._sizes[name] = written
                self._stale.discard(name)
        # A worker that does not wait for the answer (a hand-over is a notice) still believes it
        # handed these over: their tails are refused until one comes whole again.
        self._stale.update(str(r).split(" (", 1)[0] for r in refused)
        return refused


def write_trace_files(trace_dir: Path, files: dict[str, str]) -> list[str]:
    """Write the allowed files (whole); return the names refused."""
    return [str(name) for name, data in (files.items() if isinstance(files, dict) else ())
            if _write_one(Path(trace_dir), name, data, None) is None]


def _write_one(trace_dir: Path, name: Any, data: Any, at: int | None) -> int | None:
    """Write one file (whole, or from byte `at` on); its new length, or None when refused."""
    if not isinstance(name, str) or not _ALLOWED.fullmatch(name) or ".." in name.split("/"):
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, TypeError, ValueError):
        return None
    if name.endswith("trajectory.json"):  # the main one's and each sub-agent's: claims (conversation.py)
        name = name[: -len("trajectory.json")] + CLAIM_FILE
    path = trace_dir / name
    if at is None:
        _mkdirs(trace_dir, path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    else:  # a tail: into the file written before, never created here
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if at is not None:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size < at:
                return None
        _write_all(fd, raw, at or 0)
        end = (at or 0) + len(raw)
        if at is not None and st.st_size > end:
            os.ftruncate(fd, end)
    finally:
        os.close(fd)
    return end


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n


def _mkdirs(root: Path, folder: Path) -> None:
    """Make `folder` under `root`, refusing any existing component that is a link."""
    cur = root
    for part in folder.relative_to(root).parts:
        cur = cur / part
        if cur.is_symlink():
            raise OSError(f"{cur} is a link")
        cur.mkdir(exist_ok=True)


# ------------------------------------------------------------------------------ the worker's side
def _common_prefix(a: bytes, b: bytes) -> int:
    """How many leading bytes `a` and `b` share (a binary search over slice comparisons)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class TraceShipper:
    """In the worker: the trace files changed since the last hand-over, as the `files` of a `trace`
    or `done` message — whole the first time, afterwards only the tail past what the host holds.
    Call `changed` (in a thread: it reads files), send, then `handed` (with the host's refusals,
    when it waited for them)."""

    def __init__(self, trace_dir: Path, limit_bytes: int) -> None:
        self.trace_dir, self.limit = Path(trace_dir), limit_bytes
        self._held: dict[str, bytes] = {}  # what the host holds of each file
        self._seen: dict[str, tuple[int, int]] = {}  # (mtime, size) when last read
        self._pending: dict[str, tuple[bytes, tuple[int, int]]] = {}

    def changed(self, *, final: bool = False) -> dict[str, Any]:
        """Regular files under the trace folder (no links, no devices) that changed, up to the
        byte limit; `final` reads every file (no trust in modification times)."""
        out: dict[str, Any] = {}
        total, self._pending = 0, {}
        for root, _, files in os.walk(self.trace_dir, followlinks=False):
            for name in sorted(files):
                path = Path(root) / name
                rel = str(path.relative_to(self.trace_dir))
                try:
                    st = path.lstat()
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    if not final and self._seen.get(rel) == (st.st_mtime_ns, st.st_size):
                        continue
                    data = _read_regular(path)
                except OSError:
                    continue
                old = self._held.get(rel)
                at = None if old is None else _common_prefix(old, data)
                if at is not None and at == len(old) == len(data):
                    self._seen[rel] = (st.st_mtime_ns, st.st_size)
                    continue
                part = data if at is None else data[at:]
                total += len(part)
                if total > self.limit or len(out) >= MAX_TRACE_FILES:
                    return out
                blob = base64.b64encode(part).decode()
                out[rel] = blob if at is None else {"at": at, "data": blob}
                self._pending[rel] = (data, (st.st_mtime_ns, st.st_size))
        return out

    def handed(self, refused: Any = ()) -> None:
        """The host took the last `changed` files, but for `refused` (sent whole next time)."""
        refused = {str(r).split(" (", 1)[0] for r in refused} if isinstance(refused, list) else set()
        for rel, (data, seen) in self._pending.items():
            self._seen[rel] = seen
            if rel in refused:
                self._held.pop(rel, None)
            else:
                self._held[rel] = data
        self._pending = {}

    def forget(self) -> None:
        """Not sure what the host holds (a hand-over failed): send every file whole next time."""
        self._held.clear()
        self._seen.clear()
        self._pending = {}


def _read_regular(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        return f.read()
