"""`ahe diff RUN_DIR A B`: the harness difference between two iterations, tags or commits.

Each changed file is put in its component class (from its path) and each hunk is annotated
with the manifest entries whose commits touched that file between A and B — including the
automatic rollbacks (from `rollback.json`) and the gate's reverts of rejected changes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ahe.errors import AheError
from ahe.run_folder import RunFolder


def component_of(path: str) -> str:
    """The component class a workspace path belongs to."""
    p = path.strip("/")
    first = p.split("/", 1)[0]
    if p == "systemprompt.md":
        return "system_prompt"
    if p == "LongTermMEMORY.md":
        return "long_term_memory"
    if p == "agent.yaml":
        return "registry"
    return {
        "tool_descriptions": "tool_description",
        "tools": "tool_implementation",
        "middleware": "middleware",
        "skills": "skill",
        "sub_agents": "sub_agent",
    }.get(first, "other") if "/" in p else "other"


def resolve_ref(repo: Any, ref: str) -> Any:
    """An iteration number (→ tag iter-NNN), a tag, a branch or a commit → a git commit object."""
    import git

    name = f"iter-{int(ref):03d}" if str(ref).isdigit() else str(ref)
    try:
        return repo.commit(name)
    except (git.BadName, ValueError, IndexError):
        tags = sorted(t.name for t in repo.tags)
        raise AheError(
            f"{ref!r}: no such iteration, tag or commit in {repo.working_dir} (tags: {', '.join(tags) or 'none'})"
        ) from None


def commit_index(run_dir: Path) -> dict[str, dict]:
    """commit sha → the manifest entry or rollback that made it."""
    idx: dict[str, dict] = {}
    run = RunFolder(run_dir)
    for it in run.iterations():
        manifest, _ = run.iteration(it).manifest()
        for c in manifest.changes if manifest else []:
            base = {"iteration": it, "id": c.id, "component": c.component, "summary": c.summary, "status": c.status}
            if c.commit:
                idx.setdefault(c.commit, {**base, "role": "change"})
            for s in c.superseded_commits:
                idx.setdefault(s, {**base, "role": "superseded attempt"})
            for r in c.revert_commits:
                idx.setdefault(r, {**base, "role": "gate revert"})
        rb = run.iteration(it).rollback()
        for r in rb.rolled_back if rb else []:
            if r.revert_commit:
                idx[r.revert_commit] = {
                    "iteration": it, "change_iteration": it - 1, "id": r.change_id, "component": None,
                    "summary": f"rollback of {r.change_id}: {r.reason}", "status": "rolled back",
                    "role": "rollback", "method": r.method,
                }
    return idx


_HUNK = re.compile(r"^@@ .*? @@.*$", re.MULTILINE)


def _hunks(patch: str) -> list[dict]:
    starts = [m.start() for m in _HUNK.finditer(patch)]
    out = []
    for i, s in enumerate(starts):
        body = patch[s: starts[i + 1] if i + 1 < len(starts) else len(patch)]
        header, _, text = body.partition("\n")
        lines = text.splitlines()
        out.append({"header": header, "added": sum(ln.startswith("+") for ln in lines),
                    "removed": sum(ln.startswith("-") for ln in lines), "text": body.rstrip("\n")})
    return out


def build_diff(run_dir: Path, a: str, b: str) -> dict:
    import git

    run = Path(run_dir)
    ws = run / "workspace"
    try:
        repo = git.Repo(ws)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise AheError(f"{run}: no harness repository at {ws}; give the folder `ahe evolve` wrote") from None
    ca, cb = resolve_ref(repo, a), resolve_ref(repo, b)
    idx = commit_index(run)
    # commits between A and B in either direction (B may be older than A)
    between = list(repo.iter_commits(f"{ca.hexsha}..{cb.hexsha}")) + list(repo.iter_commits(f"{cb.hexsha}..{ca.hexsha}"))
    touched: dict[str, list[dict]] = {}
    for c in reversed(between):
        entry = idx.get(c.hexsha) or {"iteration": None, "id": None, "summary": c.summary, "role": "commit"}
        for path in c.stats.files:
            touched.setdefault(path, []).append({**entry, "commit": c.hexsha})
    files = []
    for d in ca.diff(cb, create_patch=True):
        path = d.b_path or d.a_path
        patch = d.diff.decode("utf-8", "replace") if isinstance(d.diff, bytes) else (d.diff or "")
        status = "added" if d.new_file else "deleted" if d.deleted_file else "renamed" if d.renamed_file else "modified"
        names = {p for p in (d.a_path, d.b_path) if p}
        made_by = [e for p in sorted(names) for e in touched.get(p, [])]
        hunks = _hunks(patch)
        for h in hunks:
            h["changes"] = made_by
        files.append({"path": path, "old_path": d.a_path if d.renamed_file else None, "status": status,
                      "component": component_of(path), "made_by": made_by, "hunks": hunks})
    groups: dict[str, list[dict]] = {}
    for f in sorted(files, key=lambda f: f["path"]):
        groups.setdefault(f["component"], []).append(f)
    return {
        "run_dir": str(run.resolve()),
        "a": {"ref": str(a), "commit": ca.hexsha},
        "b": {"ref": str(b), "commit": cb.hexsha},
        "commits_between": [
            {"commit": c.hexsha, "summary": c.summary, **({k: v for k, v in idx[c.hexsha].items()} if c.hexsha in idx else {})}
            for c in reversed(between)
        ],
        "components": groups,
    }


def _label(e: dict) -> str:
    if e.get("id") is None:
        return f"{e['commit'][:10]} {e['summary']}"
    if e.get("role") == "rollback":
        return f"automatic rollback of {e['id']} (iteration {e['change_iteration']}) in iteration {e['iteration']}: {e['summary'].split(': ', 1)[-1]} [{e['commit'][:10]}]"
    role = "" if e.get("role") == "change" else f" ({e['role']})"
    return f"{e['id']}{role} of iteration {e['iteration']}: {e['summary']} [{e['commit'][:10]}]"


def render_diff(d: dict, console: Any) -> None:
    from rich.syntax import Syntax
    from rich.markup import escape

    console.print(f"[bold]ahe diff[/] {escape(d['a']['ref'])} ({d['a']['commit'][:10]}) → {escape(d['b']['ref'])} ({d['b']['commit'][:10]})")
    if not d["components"]:
        console.print("no difference")
        return
    for comp, files in d["components"].items():
        console.print()
        console.print(f"[bold underline]{escape(comp)}[/]")
        for f in files:
            console.print(f"  [bold]{f['status']}[/] {escape(f['path'])}")
            for e in f["made_by"]:
                console.print(f"    by {escape(_label(e))}")
            for h in f["hunks"]:
                console.print(Syntax(h["text"], "diff", theme="ansi_dark", background_color="default", word_wrap=True))


def diff_command(run_dir: Path, a: str, b: str, json_out: bool = False) -> int:
    """`ahe diff`: print the grouped, annotated diff (or JSON). Returns the exit code."""
    d = build_diff(Path(run_dir), a, b)
    if json_out:
        print(json.dumps(d, indent=2))
    else:
        from rich.console import Console

        render_diff(d, Console())
    return 0
