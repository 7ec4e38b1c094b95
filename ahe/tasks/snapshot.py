"""Sealed verifiers: each task's verifier side, snapshotted and hashed at the start of a run.

Harness code runs at every rollout and may be written by an optimizer under pressure; if it can
rewrite a task's tests/test.sh, every later trial is judged by the rewritten verifier (issue 21).
So a run seals its tasks first (DESIGN.md §11.5)::

    <run>/sealed/index.json          per task: its hash, its files' hashes, the snapshot's hash
    <run>/sealed/tasks/<task>/       task.toml, instruction.md, tests/, solution/ as they were

Every verifier and oracle then runs from the snapshot, never from the live folder. The live
folder is checked against its seal at each trial's start and before each verifier stage (a
change stops the run with one sentence naming the task and the file), and at the start of a
resumed run (a changed task refuses the resume). The task hash covers the whole folder (a
benchmark is its instructions and environments too); the benchmark hash combines the task
hashes of a rollout, so two results can be compared only on the same benchmark.

Re-hashing is cheap: a file whose (inode, size, mtime, ctime) is unchanged keeps its digest,
and ctime cannot be set back by a process, so a rewrite is always re-hashed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from ahe.errors import AheError
from ahe.io import atomic_write_json

SEAL_DIR = "sealed"  # under a run folder
INDEX_FILE = "index.json"
SKIP_NAMES = frozenset({".git", "__pycache__"})  # never content of a task (nor shipped to a Ray node)
SEALED_FILES = ("task.toml", "instruction.md")  # plus everything under SEALED_DIRS
SEALED_DIRS = ("tests", "solution")


class TaskChanged(AheError):
    """A task folder (or its sealed snapshot) differs from the seal taken at the run's start."""


class TaskSeal(BaseModel):
    """One task as it was sealed: the anchor every later check compares with."""

    name: str
    source: str = Field(description="the live task folder")
    hash: str = Field(description="sha256 over every file of the task folder")
    verifier_hash: str = Field(description="sha256 over the sealed files (task.toml, instruction.md, tests/, solution/)")
    files: dict[str, str] = Field(description="relative path → sha256 of every file of the task folder")
    snapshot: Path = Field(description="the folder holding the sealed files")


class SealIndex(BaseModel):
    version: int = 1
    tasks: dict[str, TaskSeal] = Field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# hashing
# --------------------------------------------------------------------------------------------

_digests: dict[str, tuple[tuple[int, ...], str]] = {}  # path → (stat key, sha256)
_lock = threading.Lock()


def _digest(path: str, st: os.stat_result) -> str:
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with _lock:
        hit = _digests.get(path)
    if hit is not None and hit[0] == key:
        return hit[1]
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    digest = h.hexdigest()
    with _lock:
        _digests[path] = (key, digest)
    return digest


def manifest(folder: Path) -> dict[str, str]:
    """relative path → sha256 of every regular file and symlink (its target) under `folder`."""
    out: dict[str, str] = {}
    _scan(str(folder), "", out)
    return dict(sorted(out.items()))


def _scan(path: str, prefix: str, out: dict[str, str]) -> None:
    """One folder's entries into `out` (a link is recorded as the link it is, never followed; other
    kinds of file are not content). One directory listing and one lstat per regular file."""
    try:
        with os.scandir(path) as it:
            entries = list(it)
    except OSError:  # as os.walk: a folder that cannot be listed is left out
        return
    for e in entries:
        if e.name in SKIP_NAMES:
            continue
        rel = prefix + e.name
        if e.is_symlink():
            out[rel] = "link:" + hashlib.sha256(os.fsencode(os.readlink(e.path))).hexdigest()
        elif e.is_dir(follow_symlinks=False):
            _scan(e.path, rel + "/", out)
        elif e.is_file(follow_symlinks=False):
            out[rel] = _digest(e.path, e.stat(follow_symlinks=False))


def combine(files: Mapping[str, str]) -> str:
    """One sha256 for a set of (name, digest) pairs, independent of their order."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(f"{name}\0{files[name]}\n".encode())
    return h.hexdigest()


def benchmark_hash(task_hashes: Mapping[str, str]) -> str:
    """The benchmark a rollout ran on: its tasks (by name) and their hashes."""
    return combine(task_hashes)


def is_sealed(rel: str) -> bool:
    return rel in SEALED_FILES or rel.split("/", 1)[0] in SEALED_DIRS and "/" in rel


def sealed_part(files: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in files.items() if is_sealed(k)}


def first_difference(expected: Mapping[str, str], actual: Mapping[str, str]) -> str:
    """The first file (by name) that differs, said as '<file> was changed|added|removed'."""
    for name in sorted(set(expected) | set(actual)):
        if name not in actual:
            return f"{name} was removed"
        if name not in expected:
            return f"{name} was added"
        if expected[name] != actual[name]:
            return f"{name} was changed"
    return "nothing differs"


# --------------------------------------------------------------------------------------------
# sealing and checking
# --------------------------------------------------------------------------------------------

_indexes: dict[str, SealIndex] = {}  # seal folder → the index this process sealed or read first


def load_index(seal_dir: Path) -> SealIndex:
    """The seal of a run folder; the first one this process saw wins over a later edit on disk."""
    key = str(Path(seal_dir).resolve())
    with _lock:
        if key in _indexes:
            return _indexes[key]
    path = Path(seal_dir) / INDEX_FILE
    try:
        index = SealIndex.model_validate_json(path.read_text()) if path.is_file() else SealIndex()
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TaskChanged(f"{path}: the run's seal cannot be read ({first}); without it no verifier can be trusted "
                          "— start a new run folder.") from None
    with _lock:
        return _indexes.setdefault(key, index)


def unseal(seal_dir: Path) -> None:
    """Drop a seal (folder and this process's copy): for a check that seals afresh each time."""
    with _lock:
        _indexes.pop(str(Path(seal_dir).resolve()), None)
    shutil.rmtree(seal_dir, ignore_errors=True)


def seal_tasks(tasks: Iterable, seal_dir: Path) -> SealIndex:
    """Seal every task not sealed yet; check the ones already sealed (a resumed run).

    Raises `TaskChanged` naming the task and the file when a sealed task's folder changed.
    """
    seal_dir = Path(seal_dir)
    index = load_index(seal_dir)
    added = False
    for task in tasks:
        entry = index.tasks.get(task.name)
        if entry is not None:
            check_folder(entry, task.path, when="since this run sealed it")
            continue
        index.tasks[task.name] = _snapshot(task.name, Path(task.path), seal_dir)
        added = True
    if added:
        atomic_write_json(seal_dir / INDEX_FILE, index.model_dump(mode="json"))
    return index


def _snapshot(name: str, folder: Path, seal_dir: Path) -> TaskSeal:
    files = manifest(folder)
    dest = seal_dir / "tasks" / name
    tmp = dest.with_name(f".{name}.tmp")
    for stale in (tmp, dest):  # left by a run killed while sealing (the index was not written)
        if stale.exists():
            shutil.rmtree(stale)
    tmp.mkdir(parents=True)
    for part in (*SEALED_FILES, *SEALED_DIRS):
        src = folder / part
        if src.is_symlink():  # sealed as the link it is, as the manifest records it
            os.symlink(os.readlink(src), tmp / part)
        elif part in SEALED_FILES and src.is_file():
            shutil.copy2(src, tmp / part)
        elif part in SEALED_DIRS and src.is_dir():
            shutil.copytree(src, tmp / part, symlinks=True, ignore=shutil.ignore_patterns(*SKIP_NAMES))
    copied = manifest(tmp)
    if copied != sealed_part(files):  # the folder changed while it was copied
        raise TaskChanged(f"task {name} changed while it was being sealed: {first_difference(sealed_part(files), copied)} "
                          f"in {folder}; nothing was run — start the run again once the task folder is stable.")
    os.rename(tmp, dest)
    return TaskSeal(name=name, source=str(folder), hash=combine(files), verifier_hash=combine(copied),
                    files=files, snapshot=dest.resolve())


def check_folder(seal: TaskSeal, folder: Path, *, when: str = "during the run") -> None:
    """Raise `TaskChanged` (one sentence: the task and the file) when `folder` differs from the seal."""
    files = manifest(Path(folder))
    if combine(files) != seal.hash:
        raise TaskChanged(
            f"task {seal.name} changed {when}: {first_difference(seal.files, files)} in {folder}; its verifier "
            "runs from the snapshot sealed at the run's start, and a run compares harnesses on one benchmark, so "
            "the run stops — restore the task folder and resume, or start a new run folder."
        )


def check_snapshot(seal: TaskSeal, snapshot: Path | None = None) -> None:
    """Raise `TaskChanged` when the sealed snapshot itself was altered."""
    folder = Path(snapshot or seal.snapshot)
    files = manifest(folder) if folder.is_dir() else {}
    if combine(files) != seal.verifier_hash:
        raise TaskChanged(
            f"the sealed snapshot of task {seal.name} was altered: {first_difference(sealed_part(seal.files), files)} "
            f"in {folder}; no verifier runs from it, so the run stops — start a new run folder."
        )


def sealed_entry(seal_dir: Path, name: str) -> TaskSeal:
    entry = load_index(seal_dir).tasks.get(name)
    if entry is None:
        raise TaskChanged(f"task {name} is not in the seal of this run ({Path(seal_dir) / INDEX_FILE}); "
                          "a task added after the run started has no sealed verifier — start a new run folder.")
    return entry


def verifier_task(task, seal: TaskSeal, live: Path | None):
    """The task to verify with: checked live folder (when given) and snapshot, then loaded from the snapshot.

    tests/ and solution/ (and the [verifier] / [solution] settings of task.toml) come from the
    snapshot; the name and environment stay those of the live task (the sandbox is already built).
    """
    from ahe.tasks.loader import load_task

    if live is not None:
        check_folder(seal, live)
    check_snapshot(seal)
    sealed = load_task(seal.snapshot)
    return sealed.model_copy(update={"name": task.name, "environment": task.environment})


def seal_summary(index: SealIndex, names: Sequence[str]) -> dict:
    """The hashes results record: {"benchmark_hash": ..., "task_hashes": {task: hash}}."""
    hashes = {n: index.tasks[n].hash for n in sorted(names) if n in index.tasks}
    return {"benchmark_hash": benchmark_hash(hashes), "task_hashes": hashes}
