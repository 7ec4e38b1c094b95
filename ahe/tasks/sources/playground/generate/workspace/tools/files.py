"""The generator's tools: files of the project inside the session's sandbox, and a shell.

Paths are relative to the working directory (/app); absolute paths and `..` that leave it are
refused, so a stage writes only into its own project.
"""

from __future__ import annotations

import posixpath
import shlex

from ahe.runtime import ToolResult
from ahe.sandbox.output import truncate_head_tail

MAX_READ = 40_000
MAX_LIST = 300
OUTPUT_LIMIT = 8000


def _inside(path: str) -> str | None:
    """The absolute path under /app, or None when `path` leaves it."""
    norm = posixpath.normpath(posixpath.join("/app", path or "."))
    return norm if norm == "/app" or norm.startswith("/app/") else None


def _refuse(path: str) -> ToolResult:
    return ToolResult(content=f"{path!r} is outside the project; use a path relative to the project root", is_error=True)


async def list_files(path: str = "", *, sandbox) -> ToolResult | str:
    where = _inside(path)
    if where is None:
        return _refuse(path)
    res = await sandbox.exec(f"cd {shlex.quote(where)} && find . -type f -not -path '*/__pycache__/*' | sort | head -n {MAX_LIST}",
                             timeout=30)
    if res.exit_code != 0:
        return ToolResult(content=f"{path or '.'} is not a folder of the project", is_error=True)
    files = [ln.removeprefix("./") for ln in res.stdout.splitlines() if ln.strip()]
    return "\n".join(files) if files else "(no files)"


async def read_file(path: str, *, sandbox) -> ToolResult | str:
    where = _inside(path)
    if where is None:
        return _refuse(path)
    try:
        data = await sandbox.read_file(where)
    except Exception:  # noqa: BLE001 - any failure means the file is not there for the model
        return ToolResult(content=f"{path} does not exist; list_files shows what does", is_error=True)
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= MAX_READ else text[:MAX_READ] + f"\n… cut at {MAX_READ} characters"


async def write_file(path: str, content: str, *, sandbox) -> ToolResult | str:
    where = _inside(path)
    if where is None or where == "/app":
        return _refuse(path)
    parent = posixpath.dirname(where)
    await sandbox.exec(f"mkdir -p {shlex.quote(parent)}", timeout=30)
    await sandbox.write_file(where, content.encode("utf-8"))
    return f"wrote {posixpath.relpath(where, '/app')} ({len(content.splitlines())} lines)"


async def run_shell_command(command: str, timeout: int = 60, *, sandbox) -> str:
    result = await sandbox.exec(command, timeout=float(timeout))
    parts = [f"timed out after {timeout}s"] if result.timed_out else []
    parts.append(f"exit code: {result.exit_code}")
    if result.stdout:
        parts.append(truncate_head_tail(result.stdout, OUTPUT_LIMIT, result.stdout_path))
    if result.stderr:
        parts.append("[stderr]\n" + truncate_head_tail(result.stderr, OUTPUT_LIMIT // 2, result.stderr_path))
    return "\n".join(parts)


def finish(summary: str) -> str:
    return f"finished: {summary}"
