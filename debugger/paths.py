"""Paths inside the corpus: confinement for the debugger's tools, and citation checks.

The debugger agent may only read the corpus. Every path it gives is resolved here: absolute
paths, `..` and anything that resolves (through a symlink) outside the corpus root are
refused with a message saying what to give instead. Citations in reports go through the same
resolution and must name an existing file or a packed step (`debugger.steps`), and, when
given, existing lines.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from debugger import steps
from debugger.render import natural_key

_RANGE = re.compile(r"^(?P<path>.+?)(?:(?:#L|:L|#|:)(?P<a>\d+)(?:\s*[-–]\s*L?(?P<b>\d+))?)?$")
_STEP = re.compile(r"step-(\d+)\.md$")


class CorpusPathError(ValueError):
    """A path the corpus tools refuse; the message says why and what to give instead."""


def resolve_corpus_path(root: Path | str, path: str) -> Path:
    """The real path of `path` inside the corpus `root`, or CorpusPathError.

    Accepted: `corpus/<task>/...`, `<task>/...`, `.`/empty (the root). Refused: absolute
    paths, `~`, drive letters, `..`, NUL, and anything whose real path (symlinks resolved)
    is not inside the corpus.
    """
    root_real = Path(os.path.realpath(root))
    p = (path or "").strip().strip("`'\"")
    if "\x00" in p:
        raise CorpusPathError("the path contains a NUL character")
    if p.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:[\\/]", p):
        raise CorpusPathError(
            f"absolute paths are refused ({path!r}); give a path inside the corpus such as corpus/<task>/<trial>/index.md")
    p = p.replace("\\", "/")
    parts = [x for x in p.split("/") if x not in ("", ".")]
    if parts and parts[0] == "corpus":
        parts = parts[1:]
    if ".." in parts:
        raise CorpusPathError(f"'..' is refused ({path!r}); paths are relative to the corpus root")
    candidate = root_real.joinpath(*parts) if parts else root_real
    real = Path(os.path.realpath(candidate))
    if real != root_real and root_real not in real.parents:
        raise CorpusPathError(f"{path!r} resolves outside the corpus (through a symlink); it is refused")
    return real


def corpus_ref(root: Path | str, real: Path) -> str:
    """'corpus/<relative path>' of a resolved path."""
    rel = os.path.relpath(real, os.path.realpath(root))
    return "corpus" if rel == "." else f"corpus/{Path(rel).as_posix()}"


@dataclass
class CitationCheck:
    ref: str  # as given
    ok: bool
    reason: str = ""  # why it is broken
    path: str = ""  # normalized corpus/... path when it resolves
    lines: tuple[int, int] | None = None


def _line_count(path: Path) -> int:
    with open(path, "rb") as f:
        data = f.read()
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def check_citation(root: Path | str, ref: str) -> CitationCheck:
    """Is `ref` (corpus/<task>/<trial>/step-NNN.md, optionally #L3-L9 or :3-9) an existing corpus file?"""
    raw = (ref or "").strip().strip("`'\"")
    token = raw.split()[0] if raw.split() else ""
    if not token:
        return CitationCheck(ref, False, "empty reference")
    m = _RANGE.match(token)
    path_part = m.group("path") if m else token
    lines = None
    if m and m.group("a"):
        a = int(m.group("a"))
        b = int(m.group("b")) if m.group("b") else a
        lines = (a, b)
    try:
        real = resolve_corpus_path(root, path_part)
    except CorpusPathError as exc:
        return CitationCheck(ref, False, str(exc))
    norm = corpus_ref(root, real)
    packed = steps.packed_step(real)
    if not real.is_file() and packed is None:
        hint = ""
        sm = _STEP.search(path_part)
        if sm and real.parent.is_dir():
            names = sorted(set(steps.table_of(real.parent)) | {p.name for p in real.parent.glob("step-*.md")}, key=natural_key)
            if names:
                hint = f" (this trial has {names[0]} … {names[-1]})"
        what = "is a folder, not a file" if real.is_dir() else "does not exist in the corpus"
        return CitationCheck(ref, False, f"{norm} {what}{hint}", norm, lines)
    if lines is not None:
        n = _line_count(real) if packed is None else packed[2] - packed[1] + 1
        if lines[0] < 1 or lines[1] < lines[0] or lines[1] > n:
            return CitationCheck(ref, False, f"{norm} has {n} lines; lines {lines[0]}-{lines[1]} do not exist", norm, lines)
    return CitationCheck(ref, True, "", norm, lines)
