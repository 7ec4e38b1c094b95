"""What the escape tests look at after an attack: a folder's content hash (byte-identical before
and after) and the processes still alive with a marker in their command line (nothing outlives
its trial)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def alive_with(marker: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if marker.encode() in (p / "cmdline").read_bytes():
                    pids.append(int(p.name))
            except OSError:
                pass
    return pids
