"""The evolve agent's tools. The workspace's `tools/evolve_tools.py` binds each one.

Read tools see `/workspace` and `/experiment`; write tools only `/workspace`, through
`evolve_agent.confine`. Every refusal (confinement or protection) is recorded in the
manifest and as a `refusal` event of the session. `record_change` (in
`evolve_agent.record`) validates a manifest entry and commits exactly the edit it describes.
"""

from __future__ import annotations

import fnmatch
import os
import re
from typing import Any

from ahe.runtime.tools import ToolResult
from ahe.sandbox.output import truncate_head_tail
from debugger import steps as packed_steps
from evolve_agent.confine import WORKSPACE_MOUNT, PathProblem, PathRefused
from evolve_agent.context import EvolveContext
from evolve_agent.foresight import revise_change
from evolve_agent.record import record_change
from evolve_agent.tool_results import error as _error
from evolve_agent.tool_results import refused as _refused
from evolve_agent.workspace_load import load_problem

MAX_READ_BYTES = 2 * 1024 * 1024
MAX_READ_CHARS = 60_000
MAX_LIST_ENTRIES = 400
MAX_GREP_FILE_BYTES = 2 * 1024 * 1024
MAX_GREP_FILES = 20_000
SHELL_OUTPUT_LIMIT = 12_000
SKIP_DIRS = {".git", "__pycache__"}
JAIL_DENIALS = ("Read-only file system",)
NETWORK_DENIALS = ("Network is unreachable", "Temporary failure in name resolution", "Could not resolve host",
                   "Name or service not known", "Connection refused")


# ---------------------------------------------------------------------- reading
def list_files(ctx: EvolveContext, session: Any, path: str = ".", depth: int = 2) -> ToolResult | str:
    try:
        r = ctx.confinement.for_read(path)
    except PathRefused as exc:
        return _refused(ctx, session, "list_files", str(exc), path=path)
    except PathProblem as exc:
        return _error(str(exc))
    if not r.host.exists():
        return _error(f"{r.shown} does not exist")
    if r.host.is_file():
        return f"{r.shown} (file, {r.host.stat().st_size} bytes)"
    depth = max(1, min(int(depth), 6))
    lines: list[str] = []
    base = str(r.host)
    for dirpath, dirnames, filenames in os.walk(base):
        rel_dir = os.path.relpath(dirpath, base)
        level = 0 if rel_dir == "." else rel_dir.count(os.sep) + 1
        hide = ctx.confinement.hidden
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not hide(os.path.join(dirpath, d)))
        filenames = [f for f in filenames if not hide(os.path.join(dirpath, f))]
        entries = [(d, True) for d in dirnames] + [(f, False) for f in sorted(filenames)]
        for name, is_dir in entries:
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if os.path.islink(full):
                lines.append(f"{rel} -> {os.readlink(full)}")
            elif is_dir:
                lines.append(f"{rel}/")
            else:
                try:
                    lines.append(f"{rel} ({os.path.getsize(full)} B)")
                except OSError:
                    lines.append(rel)
            if len(lines) >= MAX_LIST_ENTRIES:
                break
        if len(lines) >= MAX_LIST_ENTRIES:
            lines.append(f"[... listing stopped at {MAX_LIST_ENTRIES} entries; list a sub-folder]")
            break
        if level + 1 >= depth:
            dirnames[:] = []
    return f"{r.shown}/\n" + ("\n".join(lines) if lines else "(empty)")


def name_is_steps(path: str) -> bool:
    """A corpus steps.md counts lines as its builder did: on '\\n' alone."""
    return os.path.basename(path) == packed_steps.STEPS


def _read_bytes(ctx: EvolveContext, path: str, limit: int):
    """A file's bytes, or a corpus step packed in its trial's steps.md (named step-NNN.md, debugger.steps)."""
    try:
        return ctx.confinement.read_bytes(path, limit=limit)
    except PathRefused:
        raise
    except PathProblem:
        r = ctx.confinement.for_read(path)
        if packed_steps.packed_step(r.host) is None:
            raise
        return r, packed_steps.read_text(r.host).encode("utf-8", "surrogatepass")[:limit]


def read_file(ctx: EvolveContext, session: Any, path: str, start_line: int = 1, end_line: int | None = None) -> ToolResult | str:
    try:
        r, data = _read_bytes(ctx, path, MAX_READ_BYTES + 1)
    except PathRefused as exc:
        return _refused(ctx, session, "read_file", str(exc), path=path)
    except PathProblem as exc:
        return _error(str(exc))
    if b"\x00" in data[:8192]:
        return _error(f"{r.shown} is a binary file ({len(data)} bytes); not shown")
    text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
    lines = text.splitlines()
    start = max(1, int(start_line or 1))
    end = len(lines) if end_line is None else min(len(lines), int(end_line))
    if start > max(len(lines), 1):
        return _error(f"{r.shown} has {len(lines)} lines; start_line {start} is past the end")
    out, size = [], 0
    for n in range(start, end + 1):
        line = f"{n:>6}  {lines[n - 1]}"
        size += len(line) + 1
        if size > MAX_READ_CHARS:
            out.append(f"[... stopped at line {n - 1} of {len(lines)} ({MAX_READ_CHARS} characters); read on with start_line={n}]")
            break
        out.append(line)
    header = f"{r.shown} (lines {start}-{min(end, start + len(out) - 1)} of {len(lines)})"
    if len(data) > MAX_READ_BYTES:
        header += f" [file longer than {MAX_READ_BYTES} bytes; only its start is readable here]"
    return header + "\n" + "\n".join(out)


def grep(ctx: EvolveContext, session: Any, pattern: str, path: str = ".", glob: str | None = None,
         ignore_case: bool = False, max_results: int = 100) -> ToolResult | str:
    try:
        rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        return _error(f"invalid regular expression {pattern!r}: {exc}")
    try:
        r = ctx.confinement.for_read(path)
    except PathRefused as exc:
        return _refused(ctx, session, "grep", str(exc), path=path)
    except PathProblem as exc:
        return _error(str(exc))
    if not r.host.exists():
        return _error(f"{r.shown} does not exist")
    max_results = max(1, min(int(max_results), 1000))
    shown_root = r.shown.rstrip("/")
    files: list[tuple[str, str]] = []
    if r.host.is_file():
        files = [(str(r.host), shown_root)]
    else:
        for dirpath, dirnames, filenames in os.walk(r.host):  # symlinks are never followed
            hide = ctx.confinement.hidden
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not hide(os.path.join(dirpath, d)))
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                if hide(full):
                    continue
                rel = os.path.relpath(full, r.host)
                if glob and not (fnmatch.fnmatch(name, glob) or fnmatch.fnmatch(rel, glob)):
                    continue
                if os.path.islink(full):
                    continue
                files.append((full, f"{shown_root}/{rel}"))
            if len(files) >= MAX_GREP_FILES:
                break
    hits: list[str] = []
    for full, shown in files:
        try:
            if os.path.getsize(full) > MAX_GREP_FILE_BYTES:
                continue
            with open(full, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if b"\x00" in data[:8192]:
            continue
        where = packed_steps.line_namer(full, shown)  # a hit in a corpus steps.md is named by its step
        text = data.decode("utf-8", errors="replace")
        for n, line in enumerate(text.split("\n") if name_is_steps(full) else text.splitlines(), 1):
            if rx.search(line):
                hits.append(f"{where(n)}: {line[:300]}")
                if len(hits) >= max_results:
                    return "\n".join(hits) + f"\n[... stopped at {max_results} matches; narrow the path or pattern]"
    capped = f"\n[searched only the first {MAX_GREP_FILES} files; narrow the path]" if len(files) >= MAX_GREP_FILES else ""
    return ("\n".join(hits) if hits else f"no match for {pattern!r} under {r.shown}") + capped


# ---------------------------------------------------------------------- writing
def _protected(ctx: EvolveContext, rel: str, text: str | None) -> str | None:
    return ctx.base.check_file(rel, text)


def write_file(ctx: EvolveContext, session: Any, path: str, content: str) -> ToolResult | str:
    try:
        r = ctx.confinement.for_write(path)
        problem = _protected(ctx, r.rel, content)
        if problem:
            return _refused(ctx, session, "write_file", problem, path=r.shown)
        with ctx.lock:
            ctx.confinement.write_bytes(path, content.encode("utf-8"))
    except PathRefused as exc:
        return _refused(ctx, session, "write_file", str(exc), path=path)
    except PathProblem as exc:
        return _error(str(exc))
    return f"wrote {r.shown} ({len(content)} characters)"


def edit_file(ctx: EvolveContext, session: Any, path: str, old_string: str, new_string: str,
              replace_all: bool = False) -> ToolResult | str:
    try:
        r, data = ctx.confinement.read_for_edit(path)
        text = data.decode("utf-8")
    except PathRefused as exc:
        return _refused(ctx, session, "edit_file", str(exc), path=path)
    except PathProblem as exc:
        return _error(str(exc))
    except UnicodeDecodeError:
        return _error(f"{path} is not UTF-8 text; use write_file to replace it")
    if not old_string:
        return _error("old_string is empty; give the exact text to replace (use write_file for new files)")
    count = text.count(old_string)
    if count == 0:
        return _error(f"old_string was not found in {r.shown}; read the file and copy the text exactly (whitespace included)")
    if count > 1 and not replace_all:
        return _error(f"old_string occurs {count} times in {r.shown}; give more context to make it unique, or set replace_all")
    new_text = text.replace(old_string, new_string) if replace_all else text.replace(old_string, new_string, 1)
    problem = _protected(ctx, r.rel, new_text)
    if problem:
        return _refused(ctx, session, "edit_file", problem, path=r.shown)
    try:
        with ctx.lock:
            ctx.confinement.write_bytes(path, new_text.encode("utf-8"))
    except PathRefused as exc:
        return _refused(ctx, session, "edit_file", str(exc), path=path)
    except PathProblem as exc:
        return _error(str(exc))
    return f"edited {r.shown}: replaced {count if replace_all else 1} occurrence(s)"


def delete_file(ctx: EvolveContext, session: Any, path: str) -> ToolResult | str:
    try:
        r = ctx.confinement.for_write(path)
        problem = _protected(ctx, r.rel, None)
        if problem:
            return _refused(ctx, session, "delete_file", problem, path=r.shown)
        with ctx.lock:
            ctx.confinement.delete(path)
    except PathRefused as exc:
        return _refused(ctx, session, "delete_file", str(exc), path=path)
    except PathProblem as exc:
        return _error(str(exc))
    return f"deleted {r.shown}"


# ---------------------------------------------------------------------- shell
async def shell(ctx: EvolveContext, session: Any, command: str, timeout: float = 60) -> ToolResult | str:
    if ctx.jail is None:
        return _error(f"the shell is not available in this phase: {ctx.jail_problem or 'no jail'}; use the file tools")
    limit = max(1.0, min(float(timeout), ctx.limits.shell_timeout_sec))
    try:
        res = await ctx.jail.exec(command, timeout=limit)
    except Exception as exc:  # the jail itself failed: keep the session, lose the shell
        ctx.jail_problem = f"the jail stopped working ({type(exc).__name__}: {exc})"
        try:
            await ctx.jail.stop()
        finally:
            ctx.jail = None
        return _error(f"the shell failed: {ctx.jail_problem}; use the file tools")
    parts = []
    if res.timed_out:
        parts.append(f"timed out after {limit:g}s and was killed")
    parts.append(f"exit code: {res.exit_code}")
    if res.stdout:
        parts.append(truncate_head_tail(res.stdout, SHELL_OUTPUT_LIMIT, res.stdout_path))
    if res.stderr:
        parts.append("[stderr]\n" + truncate_head_tail(res.stderr, SHELL_OUTPUT_LIMIT // 2, res.stderr_path))
    output = res.stdout + "\n" + res.stderr
    if res.exit_code != 0:
        for marker, what in ((JAIL_DENIALS, "the jail blocked an access outside /workspace"),
                             (NETWORK_DENIALS, "the jail has no network")):
            line = next((ln for ln in output.splitlines() if any(m in ln for m in marker)), None)
            if line:
                ctx.refuse(session, "shell", f"{what}: {line.strip()[:300]}", command=command)
                break
    problems = _workspace_problems(ctx)
    if problems:
        for p in problems:
            ctx.refuse(session, "shell", f"the workspace now breaks a protection rule: {p}", command=command)
        parts.append("[AHE] this leaves the workspace breaking a protection rule; record_change will refuse it "
                     "and it is discarded at the end unless you undo it:\n- " + "\n- ".join(problems))
    return "\n".join(parts)


def _workspace_problems(ctx: EvolveContext) -> list[str]:
    """Protection problems of the working tree that were not reported before."""
    try:
        changed = ctx.repo.changed_files()
    except Exception:
        changed = []
    found = ctx.base.check_tree(ctx.workspace, files=changed)
    new = [p for p in found if p not in ctx.reported_problems]
    ctx.reported_problems = set(found)
    return new


# ---------------------------------------------------------------------- finish
def finish(ctx: EvolveContext, session: Any, message: str = "") -> ToolResult | str:
    try:
        changed = ctx.repo.changed_files()
    except Exception:
        changed = []
    if changed and not ctx.finish_warned:
        ctx.finish_warned = True
        return ToolResult(
            content=(f"not finished yet: the workspace has uncommitted edits to {changed}, which will be discarded. "
                     "Record them with record_change, undo them, or call finish again to discard them."),
            is_error=True,
            metadata={"denied": True},
        )
    return message or "finished"


__all__ = [
    "WORKSPACE_MOUNT", "delete_file", "edit_file", "finish", "grep", "list_files", "load_problem",
    "read_file", "record_change", "revise_change", "shell", "write_file",
]
