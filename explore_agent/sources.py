"""A read-only snapshot of the explore agent's sources: local folders (and URLs, with network).

The snapshot is copied into the run folder (`iterations/001/explore/sources/<name>/`) so the
agent reads exactly what the manifest cites, the jail mounts one folder, and a resumed run
sees the same material. Only text files are kept, each and all under size caps; `.git`,
virtual environments and caches are skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from ahe.errors import ConfigError

SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "venv", ".mypy_cache", ".pytest_cache", ".tox"}
MAX_FILE_BYTES = 256 * 1024
URL_TIMEOUT_SEC = 20


@dataclass
class Snapshot:
    root: Path
    names: list[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    notes: list[str] = field(default_factory=list)


def _name(source: str, taken: set[str]) -> str:
    base = source.rstrip("/").rsplit("/", 1)[-1] or "source"
    base = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in base).strip(".-") or "source"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}-{i}", i + 1
    taken.add(name)
    return name


def _is_text(data: bytes) -> bool:
    if b"\x00" in data[:8192]:
        return False
    try:
        data[:8192].decode("utf-8")
    except UnicodeDecodeError as exc:  # a cut multi-byte character at the end is fine
        return exc.start > 8180
    return True


def _copy_folder(src: Path, dest: Path, snap: Snapshot, budget: int) -> None:
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not os.path.islink(os.path.join(dirpath, d)))
        for fn in sorted(filenames):
            p = Path(dirpath) / fn
            if p.is_symlink() or not p.is_file():
                continue
            size = p.stat().st_size
            if size > MAX_FILE_BYTES:
                continue
            if snap.bytes + size > budget:
                snap.notes.append(f"{src}: stopped at {snap.bytes} bytes (the sources' size cap); the rest is not copied")
                return
            data = p.read_bytes()
            if not _is_text(data):
                continue
            out = dest / p.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            snap.files += 1
            snap.bytes += size


def _fetch(url: str, dest: Path, snap: Snapshot) -> None:
    try:
        with urllib.request.urlopen(url, timeout=URL_TIMEOUT_SEC) as resp:  # noqa: S310 (the user's own list)
            data = resp.read(MAX_FILE_BYTES + 1)
    except Exception as exc:  # no network here is normal: say so and go on with the rest
        snap.notes.append(f"{url}: not fetched ({type(exc).__name__}: {exc})")
        return
    if len(data) > MAX_FILE_BYTES or not _is_text(data):
        snap.notes.append(f"{url}: skipped (not text, or over {MAX_FILE_BYTES} bytes)")
        return
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "page.txt").write_bytes(data)
    (dest / "SOURCE.txt").write_text(url + "\n")
    snap.files += 1
    snap.bytes += len(data)


def snapshot_sources(sources: list[str], dest: Path, *, max_total_mb: float = 20) -> Snapshot:
    """Copy every source into `dest/<name>/` (replacing an earlier snapshot); returns what was copied."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    snap, taken = Snapshot(root=dest), set()
    budget = int(max_total_mb * 1024 * 1024)
    for src in sources:
        name = _name(src, taken)
        if src.startswith(("http://", "https://")):
            _fetch(src, dest / name, snap)
        else:
            path = Path(src).expanduser()
            if not path.exists():
                raise ConfigError(f"explore.sources: {src} does not exist; give local folders (or URLs) with harness code or docs")
            if path.is_file():
                (dest / name).mkdir()
                shutil.copyfile(path, dest / name / path.name)
                snap.files += 1
            else:
                (dest / name).mkdir()
                _copy_folder(path, dest / name, snap, budget)
        if (dest / name).exists():
            snap.names.append(name)
    (dest.parent / "sources.json").write_text(json.dumps(
        {"sources": sources, "names": snap.names, "files": snap.files, "bytes": snap.bytes, "notes": snap.notes}, indent=2))
    return snap
