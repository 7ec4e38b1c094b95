"""`record_change`: validate a manifest entry and commit exactly the edit it describes.

The entry's files must be exactly the workspace's uncommitted edits, inside the session's
scope, free of protection problems, and the workspace must load with them; then one commit
per change, and the foresight replay's verdict is appended to the answer."""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import ValidationError

from ahe.harness.manifest import ChangeEntry
from ahe.run_folder import RunFolder
from ahe.runtime.tools import ToolResult
from debugger import steps as packed_steps
from evolve_agent.confine import EXPERIMENT_MOUNT, PathProblem, PathRefused
from evolve_agent.context import EvolveContext
from evolve_agent.foresight import replay_recorded_change
from evolve_agent.protected import AGENT_FILE, outside_link
from evolve_agent.tool_results import error as _error
from evolve_agent.tool_results import refused as _refused
from evolve_agent.workspace_load import load_problem


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
        if not ref or ref.startswith("/") or ".." in ref.split("/") or not any(packed_steps.exists(root / ref) for root in roots):
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
        change_id, problem = _change_id(ctx, given_id)
        if problem:
            return _error(problem)

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
        problem = _entry_problem(ctx, entry) or _scope_problem(ctx, files) or _files_problem(ctx, files)
        if problem:
            return _error(problem)

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


def _change_id(ctx: EvolveContext, given_id: str | None) -> tuple[str, str | None]:
    """The id the entry gets (a repair keeps its own), or why the given one cannot be used."""
    if ctx.repair_id is not None:
        if given_id not in (None, ctx.repair_id):
            return "", f"this session repairs {ctx.repair_id} only; record it with id {ctx.repair_id!r}"
        if ctx.repair_result is not None:
            return "", f"{ctx.repair_id} was already recorded again as {ctx.repair_result.commit}; call finish"
        return ctx.repair_id, None
    if given_id is not None:
        if ctx.manifest.get(given_id) is not None:
            return "", (f"id {given_id!r} is already used in this iteration; omit id to get the next one "
                        f"({ctx.id_prefix}{ctx.manifest.next_id()})")
        return given_id, None
    return ctx.id_prefix + ctx.manifest.next_id(), None


def _entry_problem(ctx: EvolveContext, entry: ChangeEntry) -> str | None:
    """A component this session may not change, or predictions naming tasks the experiment lacks."""
    if ctx.allowed_components is not None and entry.component not in ctx.allowed_components:
        return (f"component {entry.component!r} is not yours to change here; record only "
                f"{', '.join(sorted(ctx.allowed_components))} changes")
    if ctx.known_tasks:
        named = entry.predicted_fixes + entry.predicted_regressions + [
            e.task for e in entry.failure_evidence if e.task not in ctx.evidence_sources]
        unknown = sorted({t for t in named if t not in ctx.known_tasks})
        if unknown:
            return (f"unknown task name(s) {unknown}; predictions and evidence must name tasks of this "
                    f"experiment (see results.json): {sorted(ctx.known_tasks)[:40]}")
    return None


def _files_problem(ctx: EvolveContext, files: list[str]) -> str | None:
    """The entry's files must be exactly the workspace's uncommitted edits."""
    changed = ctx.repo.changed_files()
    if not changed:
        return "the workspace has no uncommitted edits; make the edit first, then record it"
    not_listed = sorted(set(changed) - set(files))
    unchanged = sorted(set(files) - set(changed))
    if not (not_listed or unchanged):
        return None
    msg = [f"the entry's files must be exactly the uncommitted edits of the workspace ({changed})"]
    if not_listed:
        msg.append(f"edited but not listed: {not_listed} (list them, or undo them if they belong to another change)")
    if unchanged:
        msg.append(f"listed but not edited (or missing): {unchanged}")
    return "; ".join(msg)


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
