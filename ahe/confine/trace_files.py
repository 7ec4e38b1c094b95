"""The trace files a worker hands back, written into the trial folder as plain files only.

A worker could name anything (`../result.json`, `verifier/reward.txt`, a link to a task's
tests), so only the files a session writes are accepted — `trajectory.json`, `events.jsonl`
and the same under `sub_agents/<NN-name>/` — each written fresh, never through a link. The
worker's trajectory.json files (the session's and each sub-agent's) are written as
`trajectory.claimed.json`: they are the harness's claims; the trial's trajectory.json files are
rebuilt by the host from the gateway's record (conversation.py).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from pathlib import Path

from ahe.confine.conversation import CLAIM_FILE

_ALLOWED = re.compile(r"(?:sub_agents/\d{2,3}-[A-Za-z0-9_.-]{1,80}/)*(?:trajectory\.json|events\.jsonl)")


class TraceSink:
    """The trace files of one session on the host, with a cap on their total size (a worker that
    sends ever new `sub_agents/...` files must not fill the host's disk)."""

    def __init__(self, trace_dir: Path, limit_bytes: int) -> None:
        self.trace_dir, self.limit = Path(trace_dir), limit_bytes
        self._sizes: dict[str, int] = {}

    def write(self, files: dict[str, str]) -> list[str]:
        """Write what is allowed and fits; return the names refused."""
        fits, refused = {}, []
        for name, data in files.items() if isinstance(files, dict) else ():
            size = len(data) * 3 // 4 if isinstance(data, str) else 0
            others = sum(v for k, v in self._sizes.items() if k != name)
            if others + size > self.limit:
                refused.append(f"{name} (over the session's {self.limit >> 20} MB of trace)")
                continue
            fits[name] = data
        refused += write_trace_files(self.trace_dir, fits)
        for name, data in fits.items():
            if name not in refused:
                self._sizes[name] = len(data) * 3 // 4
        return refused


def write_trace_files(trace_dir: Path, files: dict[str, str]) -> list[str]:
    """Write the allowed files; return the names refused."""
    refused = []
    for name, data in files.items() if isinstance(files, dict) else ():
        if not isinstance(name, str) or not _ALLOWED.fullmatch(name) or ".." in name.split("/"):
            refused.append(str(name))
            continue
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, TypeError, ValueError):
            refused.append(name)
            continue
        if name.endswith("trajectory.json"):  # the main one's and each sub-agent's: claims (conversation.py)
            name = name[: -len("trajectory.json")] + CLAIM_FILE
        path = Path(trace_dir) / name
        _mkdirs(Path(trace_dir), path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
    return refused


def _mkdirs(root: Path, folder: Path) -> None:
    """Make `folder` under `root`, refusing any existing component that is a link."""
    cur = root
    for part in folder.relative_to(root).parts:
        cur = cur / part
        if cur.is_symlink():
            raise OSError(f"{cur} is a link")
        cur.mkdir(exist_ok=True)
