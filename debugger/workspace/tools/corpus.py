"""The debugger agent's tools: read-only access to the trace corpus, and the report.

Every path goes through `debugger.paths.resolve_corpus_path`: absolute paths, `..` and
symlinks that lead out of the corpus are refused. The corpus root and the task come from the
session state, set by the debug phase before the session starts. A trial's steps are packed
in its steps.md (`debugger.steps`); the tools show and read each one as `step-NNN.md`, and
grep reports a hit in steps.md at the step and the line inside it, so what they print can be
cited as it is.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from ahe.runtime import ToolResult
from debugger import steps as packed
from debugger.paths import CorpusPathError, corpus_ref, resolve_corpus_path
from debugger.render import natural_key

MAX_LIST = 300
DEFAULT_LINES = 200
MAX_LINES = 400
MAX_CHARS = 40_000
GREP_LINE_CHARS = 2_000
GREP_SECONDS = 10.0


def _root(state: dict[str, Any]) -> Path:
    root = state.get("corpus_root")
    if not root:
        raise RuntimeError("the session has no corpus (state['corpus_root'] is not set)")
    return Path(root)


def _refuse(exc: Exception) -> ToolResult:
    return ToolResult(content=str(exc), is_error=True, metadata={"error_kind": "path_refused"})


def list_files(path: str = "", *, state: dict[str, Any]) -> ToolResult | str:
    root = _root(state)
    try:
        real = resolve_corpus_path(root, path)
    except CorpusPathError as exc:
        return _refuse(exc)
    if packed.packed_step(real) is not None:
        return f"{corpus_ref(root, real)} is a step (lines of steps.md); read it with read_file"
    if not real.exists():
        return ToolResult(content=f"{corpus_ref(root, real)} does not exist; list its parent folder to see what does", is_error=True)
    if real.is_file():
        return f"{corpus_ref(root, real)} is a file ({real.stat().st_size:,} bytes); read it with read_file"
    rows: list[tuple[bool, str, int]] = []  # (is a folder, name, size)
    for e in os.scandir(real):
        if e.is_dir(follow_symlinks=False):
            rows.append((True, e.name, 0))
            continue
        try:
            rows.append((False, e.name, e.stat(follow_symlinks=False).st_size))
        except OSError:
            rows.append((False, e.name, 0))
    names = {name for _, name, _ in rows}
    rows += [(False, name, -(b - a + 1)) for name, (a, b) in packed.table_of(real).items() if name not in names]
    entries = sorted(rows, key=lambda r: (not r[0], natural_key(r[1])))
    lines = [f"{corpus_ref(root, real)}/ ({len(entries)} entries)"]
    for is_dir, name, size in entries[:MAX_LIST]:
        if is_dir:
            lines.append(f"  {name}/")
        elif size < 0:
            lines.append(f"  {name}  {-size} lines of steps.md")
        else:
            lines.append(f"  {name}  {size:,}")
    if len(entries) > MAX_LIST:
        lines.append(f"  … {len(entries) - MAX_LIST} more; a trial's index.md lists every step in one line each")
    return "\n".join(lines)


def read_file(path: str, start_line: int | None = None, end_line: int | None = None, *, state: dict[str, Any]) -> ToolResult | str:
    root = _root(state)
    try:
        real = resolve_corpus_path(root, path)
    except CorpusPathError as exc:
        return _refuse(exc)
    ref = corpus_ref(root, real)
    if real.is_dir():
        return ToolResult(content=f"{ref} is a folder; use list_files", is_error=True)
    try:
        text = packed.read_text(real)
    except (FileNotFoundError, IsADirectoryError):
        return ToolResult(content=f"{ref} does not exist in the corpus", is_error=True)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    n = len(lines)
    a = max(1, start_line or 1)
    b = min(n, end_line or (a + DEFAULT_LINES - 1), a + MAX_LINES - 1)
    if a > n:
        return ToolResult(content=f"{ref} has {n} lines; start_line {a} is past the end", is_error=True)
    out, size = [], 0
    for i in range(a, b + 1):
        line = f"{i:>5}| {lines[i - 1]}"
        if size + len(line) > MAX_CHARS and out:
            b = i - 1
            break
        out.append(line)
        size += len(line) + 1
    more = f"; continue with start_line={b + 1}" if b < n else ""
    return f"{ref} (lines {a}-{b} of {n}{more})\n" + "\n".join(out)


def grep(pattern: str, path: str = "", regex: bool = False, max_results: int = 50, *, state: dict[str, Any]) -> ToolResult | str:
    root = _root(state)
    if not path and state.get("task"):
        path = f"corpus/{state['task']}"
    try:
        real = resolve_corpus_path(root, path)
    except CorpusPathError as exc:
        return _refuse(exc)
    if regex:
        try:
            rx = re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            return ToolResult(content=f"invalid regular expression: {exc}", is_error=True)
        match = lambda line: rx.search(line) is not None  # noqa: E731
    else:
        needle = pattern.lower()
        match = lambda line: needle in line.lower()  # noqa: E731
    files = [real] if real.is_file() or packed.packed_step(real) else []
    if real.is_dir():
        for dirpath, dirnames, filenames in os.walk(real):  # os.walk does not follow symlinked folders
            dirnames.sort(key=natural_key)
            files.extend(Path(dirpath) / f for f in sorted(filenames, key=natural_key) if f.endswith(".md"))
    hits: list[str] = []
    deadline = time.monotonic() + GREP_SECONDS
    stopped = ""
    for f in files:
        if time.monotonic() > deadline:
            stopped = f" (search stopped after {GREP_SECONDS:g} s)"
            break
        if f.is_symlink():
            continue
        try:
            text = packed.read_text(f)
        except OSError:
            continue
        if not regex and needle not in text.lower():
            continue
        ref = corpus_ref(root, f)
        where = packed.line_namer(f, ref)
        for i, line in enumerate(text.split("\n"), 1):
            if match(line[:GREP_LINE_CHARS]):
                hits.append(f"{where(i)}: {line[:300]}")
                if len(hits) >= max_results:
                    break
        if len(hits) >= max_results:
            stopped = f" (first {max_results} matches; narrow the path or the pattern)"
            break
    if not hits:
        return f"no match for {pattern!r} under {corpus_ref(root, real)}{stopped}"
    return f"{len(hits)} match(es){stopped}\n" + "\n".join(hits)


def submit_report(*, state: dict[str, Any], **report: Any) -> ToolResult | str:
    from debugger.report import TaskReport

    try:
        checked = TaskReport.model_validate(report)
    except Exception as exc:  # ReportGate normally catches this first; keep the session going
        return ToolResult(content=f"report not accepted: {exc}", is_error=True, metadata={"denied": True})
    state["report"] = checked.model_dump()
    return "report received"
