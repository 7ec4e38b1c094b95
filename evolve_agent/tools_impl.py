"""The evolve agent's tools. The workspace's `tools/evolve_tools.py` binds each one.

Read tools see `/workspace` and `/experiment`; write tools only `/workspace`, through
`evolve_agent.confine`. Every refusal (confinement or protection) is recorded in the
manifest and as a `refusal` event of the session. `record_change` validates a manifest entry
and commits exactly the edit it describes.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ahe.run_folder import RunFolder
from ahe.runtime.tools import ToolResult
from ahe.sandbox.output import truncate_head_tail
from evolve_agent.confine import EXPERIMENT_MOUNT, WORKSPACE_MOUNT, PathProblem, PathRefused
from evolve_agent.context import EvolveContext
from evolve_agent.foresight import replay_recorded_change, revise_change
from ahe.harness.manifest import ChangeEntry
from evolve_agent.protected import AGENT_FILE, outside_link

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


def _error(text: str) -> ToolResult:
    return ToolResult(content=text, is_error=True)


def _refused(ctx: EvolveContext, session: Any, tool: str, reason: str, **where: Any) -> ToolResult:
    ctx.refuse(session, tool, reason, **where)
    return ToolResult(content=f"refused: {reason}", is_error=True, metadata={"refused": True})


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
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
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


def read_file(ctx: EvolveContext, session: Any, path: str, start_line: int = 1, end_line: int | None = None) -> ToolResult | str:
    try:
        r, data = ctx.confinement.read_bytes(path, limit=MAX_READ_BYTES + 1)
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
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
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
        for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if rx.search(line):
                hits.append(f"{shown}:{n}: {line[:300]}")
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


# ---------------------------------------------------------------------- record_change / finish
def _purge_pycache(root: Path) -> None:
    for dirpath, dirnames, _ in os.walk(root):
        if ".git" in dirnames:
            dirnames.remove(".git")
        if "__pycache__" in dirnames:
            shutil.rmtree(os.path.join(dirpath, "__pycache__"), ignore_errors=True)
            dirnames.remove("__pycache__")


def load_problem(root: Path) -> str | None:
    """None when the workspace loads in the runtime; else the loader's one-line error."""
    from ahe.errors import ConfigError
    from ahe.runtime import load_agent

    _purge_pycache(root)  # a stale .pyc of a same-size edit in the same second must not be used
    from evolve_agent.import_probe import import_side_effects

    acts = import_side_effects(root)  # before AHE's own process imports any of it
    if acts:
        return ("importing the workspace's code acts outside the workspace, which is refused: "
                + "; ".join(acts[:5]))
    try:
        load_agent(root)
    except ConfigError as exc:
        return str(exc)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _normalise_file(ctx: EvolveContext, f: str) -> str:
    r = ctx.confinement.locate(f)
    if r.root != "workspace":
        raise PathRefused(f"{f!r} is not in the workspace; a change lists workspace files only")
    if not r.rel:
        raise PathProblem("list files, not the workspace folder itself")
    return r.rel


def _evidence_missing(ctx: EvolveContext, entry: ChangeEntry) -> list[str]:
    if ctx.experiment_dir is None:
        return []
    it = RunFolder(ctx.experiment_dir).iteration(ctx.iteration)
    roots = [ctx.experiment_dir, it.root, it.corpus]
    missing = []
    for ev in entry.failure_evidence:
        ref = re.sub(r"(#.*|:\d+(-\d+)?)$", "", ev.ref.strip())
        if ref.startswith(EXPERIMENT_MOUNT + "/"):
            ref = ref[len(EXPERIMENT_MOUNT) + 1:]
        if not ref or ref.startswith("/") or ".." in ref.split("/") or not any((root / ref).exists() for root in roots):
            missing.append(ev.ref)
    return missing


def _validation_message(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(entry)"
        parts.append(f"{loc}: {e['msg']}")
    return "invalid manifest entry: " + "; ".join(parts)


def record_change(ctx: EvolveContext, session: Any, **fields: Any) -> ToolResult | str:
    tool = "record_change"
    given_id = fields.pop("id", None)
    with ctx.lock:
        if ctx.repair_id is not None:
            if given_id not in (None, ctx.repair_id):
                return _error(f"this session repairs {ctx.repair_id} only; record it with id {ctx.repair_id!r}")
            if ctx.repair_result is not None:
                return _error(f"{ctx.repair_id} was already recorded again as {ctx.repair_result.commit}; call finish")
            change_id = ctx.repair_id
        elif given_id is not None:
            if ctx.manifest.get(given_id) is not None:
                return _error(f"id {given_id!r} is already used in this iteration; omit id to get the next one ({ctx.manifest.next_id()})")
            change_id = given_id
        else:
            change_id = ctx.manifest.next_id()

        files: list[str] = []
        try:
            for f in fields.get("files") or []:
                rel = _normalise_file(ctx, str(f))
                if rel not in files:
                    files.append(rel)
        except PathRefused as exc:
            return _refused(ctx, session, tool, str(exc), path=str(f))
        except PathProblem as exc:
            return _error(str(exc))
        fields["files"] = files
        try:
            entry = ChangeEntry(id=change_id, **fields)
        except ValidationError as err:
            return _error(_validation_message(err))
        if ctx.allowed_components is not None and entry.component not in ctx.allowed_components:
            return _error(f"component {entry.component!r} is not yours to change here; record only "
                          f"{', '.join(sorted(ctx.allowed_components))} changes")
        if ctx.known_tasks:
            named = entry.predicted_fixes + entry.predicted_regressions + [
                e.task for e in entry.failure_evidence if e.task not in ctx.evidence_sources]
            unknown = sorted({t for t in named if t not in ctx.known_tasks})
            if unknown:
                return _error(f"unknown task name(s) {unknown}; predictions and evidence must name tasks of this "
                              f"experiment (see results.json): {sorted(ctx.known_tasks)[:40]}")

        scope = _scope_problem(ctx, files)
        if scope:
            return _error(scope)
        changed = ctx.repo.changed_files()
        if not changed:
            return _error("the workspace has no uncommitted edits; make the edit first, then record it")
        not_listed = sorted(set(changed) - set(files))
        unchanged = sorted(set(files) - set(changed))
        if not_listed or unchanged:
            msg = [f"the entry's files must be exactly the uncommitted edits of the workspace ({changed})"]
            if not_listed:
                msg.append(f"edited but not listed: {not_listed} (list them, or undo them if they belong to another change)")
            if unchanged:
                msg.append(f"listed but not edited (or missing): {unchanged}")
            return _error("; ".join(msg))

        problems = [p for rel in files if (p := outside_link(ctx.workspace, rel))]
        problems += ctx.base.check_tree(ctx.workspace, files=[])
        if problems:
            return _refused(ctx, session, tool, "; ".join(problems), path=", ".join(files))
        load_err = load_problem(ctx.workspace)
        if load_err:
            return _error(f"the workspace does not load with this edit, so it cannot be recorded: {load_err}")
        try:
            commit = _commit_exactly(ctx, entry, files)
        except _CommitRefused as exc:
            return _refused(ctx, session, tool, str(exc), path=", ".join(files))
        except Exception as exc:
            return _error(f"could not commit the change: {type(exc).__name__}: {exc}")
        entry.commit = commit
        entry.evidence_missing = _evidence_missing(ctx, entry)
        replay_text = replay_recorded_change(ctx, entry)
        if ctx.repair_id is not None:
            ctx.repair_result = entry
        else:
            ctx.manifest.changes.append(entry)
        ctx.finish_warned = False
        ctx.save_progress()
    note = ""
    if entry.evidence_missing:
        note = f" Note: these evidence refs name no file of the experiment: {entry.evidence_missing}."
    if session is not None:
        try:
            session.note("change_recorded", id=change_id, commit=commit, files=files, component=entry.component)
        except Exception:
            pass
    replay_text = f"\n\n{replay_text}" if replay_text else ""
    return f"recorded {change_id} as commit {commit[:12]} with {len(files)} file(s): {', '.join(files)}.{note}{replay_text}"


def _scope_problem(ctx: EvolveContext, files: list[str]) -> str | None:
    """For an agent limited to some paths and registry keys (the explore agent): what is out of scope."""
    if ctx.allowed_paths is not None:
        outside = [f for f in files if not any(f == p or f.startswith(p) for p in ctx.allowed_paths)]
        if outside:
            return f"{outside}: outside what you may change ({', '.join(ctx.allowed_paths)}); undo those edits"
    if ctx.registry_keys is not None and "agent.yaml" in files:
        import yaml

        try:
            before = yaml.safe_load(ctx.repo.show_file(ctx.base_commit, "agent.yaml") or "") or {}
            after = yaml.safe_load((ctx.workspace / "agent.yaml").read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            return f"agent.yaml cannot be compared with the base: {exc}"
        keys = sorted(k for k in set(before) | set(after) if k not in ctx.registry_keys and before.get(k) != after.get(k))
        if keys:
            return f"agent.yaml: you may change only {', '.join(sorted(ctx.registry_keys))}, not {', '.join(keys)}"
    return None


class _CommitRefused(Exception):
    pass


def _commit_exactly(ctx: EvolveContext, entry: ChangeEntry, files: list[str]) -> str:
    """Stage exactly `files`, re-check what is staged (the shell may race), and commit the index."""
    git = ctx.repo.repo.git
    git.reset("-q")  # nothing else staged
    try:
        for p in files:
            if os.path.lexists(ctx.workspace / p):
                git.add("--", p)
            else:
                git.rm("--cached", "--ignore-unmatch", "-r", "-q", "--", p)
        staged = [s for s in git.diff("--cached", "--name-only", "-z").split("\x00") if s]
        if sorted(staged) != sorted(files):
            raise _CommitRefused(f"the staged files {sorted(staged)} differ from the entry's {sorted(files)} (the workspace changed meanwhile)")
        for rel in (AGENT_FILE, ctx.base.system_prompt, ".gitignore"):
            if rel in files:
                mode = git.ls_files("-s", "--", rel).split(" ", 1)[0] if rel in staged else ""
                text = None
                if mode:
                    text = "" if mode == "120000" else git.show(f":{rel}", strip_newline_in_stdout=False)
                problem = ctx.base.check_file(rel, text)
                if problem:
                    raise _CommitRefused(problem)
        message = _commit_message(ctx, entry)
        git.commit("-q", "-m", message, "--no-verify")
        return ctx.repo.head()
    except BaseException:
        try:
            git.reset("-q")
        except Exception:
            pass
        raise


def _commit_message(ctx: EvolveContext, entry: ChangeEntry) -> str:
    lines = [f"{entry.id} [{entry.component}]: {entry.summary}".strip()[:200], "",
             f"Root cause: {entry.root_cause}", f"Fix: {entry.targeted_fix}"]
    if entry.predicted_fixes:
        lines.append(f"Predicted fixes: {', '.join(entry.predicted_fixes)}")
    if entry.predicted_regressions:
        lines.append(f"Predicted regressions: {', '.join(entry.predicted_regressions)}")
    lines.append(f"\nRecorded by the evolve agent (iteration {ctx.iteration}, {ctx.session_label}).")
    return "\n".join(lines)


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
