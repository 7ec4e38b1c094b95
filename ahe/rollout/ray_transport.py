"""Folders as bytes for the Ray executor: what a worker needs, and what a trial leaves.

No shared file system is assumed between the driver and the nodes. A folder (a task, the
harness at the evaluated commit) travels as an uncompressed tar whose sha256 names it, so a
node unpacks each distinct content once into its own cache; a finished trial's folder comes
back as plain entries and the driver writes it exactly as the local executor would.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ahe.rollout.trial import RESULT_FILE

if TYPE_CHECKING:
    from ahe.rollout.models import TrialResult

# Never shipped: version control and byte-code caches (the runtime compiles from source).
SKIP_NAMES = {".git", "__pycache__"}


def pack_folder(root: Path, *, skip_files: frozenset[str] = frozenset()) -> bytes:
    """A deterministic tar of `root` (sorted names, no owners, zero mtimes), for hashing and shipping."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_NAMES)
            rel_dir = Path(dirpath).relative_to(root)
            for name in sorted([*dirnames, *filenames]):
                rel = rel_dir / name
                if str(rel) in skip_files or name in SKIP_NAMES:
                    continue
                info = tar.gettarinfo(str(Path(dirpath) / name), arcname=str(rel))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isreg():
                    with open(Path(dirpath) / name, "rb") as fh:
                        tar.addfile(info, fh)
                elif info.isdir() or info.issym():
                    tar.addfile(info)  # sockets, fifos and devices are not trial output
    return buf.getvalue()


def content_id(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def unpack(data: bytes, dest: Path, *, skip: frozenset[str] = frozenset()) -> None:
    """Extract a tar made by `pack_folder`; members that would land outside `dest` are refused."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        members = [m for m in tar.getmembers() if m.name not in skip]
        tar.extractall(dest, members=members, filter="tar")


def cached_folder(cache_root: Path, cid: str, data_ref: list, *, shared: bool = False) -> Path:
    """The unpacked folder for content `cid` on this node; unpacked once, then reused.

    `data_ref` is a one-element list holding the Ray object, so the bytes are fetched from
    the object store only when this node has not unpacked that content yet. `shared`: the folder
    itself readable by other uids (mkdtemp makes it 0700); tasks and sealed snapshots stay private.
    """
    final = cache_root / cid
    if final.is_dir():
        return final
    import ray

    data = ray.get(data_ref[0])
    cache_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{cid[:12]}-", dir=cache_root))
    unpack(data, tmp)
    if shared:  # a harness workspace: a docker trial's worker reads it as a uid of its own
        os.chmod(tmp, 0o755)
    try:
        os.rename(tmp, final)
    except OSError:  # another trial on this node unpacked it first
        shutil.rmtree(tmp, ignore_errors=True)
    return final


# A finished trial's folder on its way back: (relative path, kind, mode, bytes) per entry, kind
# "d" folder, "f" file, "l" symlink (bytes = its target). Plain tuples, pickled by Ray in C: the
# driver writes a whole rollout's folders in one burst at the end, from several threads, and
# tarfile would parse every member in Python, holding the GIL its other threads need.
Entry = tuple[str, str, int, bytes]


def trial_entries(root: Path, *, skip_files: frozenset[str] = frozenset()) -> list[Entry]:
    """The folder's entries, parents before children; symlinks kept as links, never followed."""
    out: list[Entry] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for name in sorted([*dirnames, *filenames]):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            path = os.path.join(dirpath, name)
            if rel in skip_files or name in SKIP_NAMES:
                continue
            if os.path.islink(path):
                out.append((rel, "l", 0, os.fsencode(os.readlink(path))))
            elif os.path.isdir(path):
                out.append((rel, "d", 0, b""))
            elif os.path.isfile(path):  # sockets, fifos and devices are not trial output
                with open(path, "rb") as fh:
                    out.append((rel, "f", os.fstat(fh.fileno()).st_mode & 0o7777, fh.read()))
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_NAMES and not os.path.islink(os.path.join(dirpath, d)))
    return out


def write_entries(entries: list[Entry], dest: Path) -> None:
    """Write `trial_entries` under `dest`. As tarfile's "tar" filter would: no absolute or `..`
    names, nothing written through a link out of `dest`, no setuid/setgid/sticky bits and no
    group/other write bits."""
    dest.mkdir(parents=True, exist_ok=True)
    top = os.path.realpath(dest)
    for rel, kind, mode, data in entries:
        if os.path.isabs(rel) or ".." in rel.split("/"):
            raise ValueError(f"refusing a trial folder entry outside the folder: {rel!r}")
        path = os.path.join(top, rel)
        parent = os.path.realpath(os.path.dirname(path))
        if parent != top and not parent.startswith(top + os.sep):
            raise ValueError(f"refusing a trial folder entry written through a link out of the folder: {rel!r}")
        if kind == "d":
            os.makedirs(path, exist_ok=True)
        elif kind == "l":
            os.symlink(os.fsdecode(data), path)
        else:
            with open(path, "wb") as fh:
                fh.write(data)
            os.chmod(path, mode & 0o755)


def write_trial_folder(entries: list[Entry], trial_dir: Path, result: "TrialResult") -> None:
    """Write a trial folder shipped back from a worker: everything, then result.json last.

    result.json is written by the same call as `execute_trial` uses, so the file is the
    same byte for byte as a local run's.
    """
    import json

    from ahe.io import atomic_write_json

    if trial_dir.exists():
        shutil.rmtree(trial_dir)  # a half-finished earlier attempt
    write_entries(entries, trial_dir)
    atomic_write_json(trial_dir / RESULT_FILE, json.loads(result.model_dump_json()))
