"""The trace files a worker hands back, written into the trial folder as plain files only.

A worker could name anything (`../result.json`, `verifier/reward.txt`, a link to a task's
tests), so only the files a session writes are accepted — `trajectory.json`, `events.jsonl`
and the same under `sub_agents/<NN-name>/` — each written fresh, never through a link.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from pathlib import Path

_ALLOWED = re.compile(r"(?:sub_agents/\d{2,3}-[A-Za-z0-9_.-]{1,80}/)*(?:trajectory\.json|events\.jsonl)")


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
