"""The harness before and after a change, as temporary read-only copies, and what kind of change it is.

Both sides are exported with `git archive` from the workspace repository's objects: nothing
is checked out in the live workspace, its index and its work tree are never touched, and
nothing is written into the run folder.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

from ahe.errors import AheError
from ahe.runtime.workspace import LoadedAgent

TEXT_PARTS = {  # what a file's change does that no replay can compute
    "systemprompt": "system prompt text", "memory": "long-term memory text", "skills/": "skill text",
    "sub_agents/": "sub-agent configuration", "tool_descriptions/": "tool description text",
}


def _git(repo: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=60)
    if proc.returncode != 0:
        raise AheError(f"{repo}: git {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()[:300]}")
    return proc.stdout


def resolve(repo: Path, rev: str) -> str:
    return _git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}").decode().strip()


def export_commit(repo: Path, commit: str, dest: Path) -> Path:
    """The tree of `commit` written into `dest` (a new folder)."""
    data = _git(repo, "archive", "--format=tar", commit)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def changed_files(repo: Path, old: str, new: str) -> list[str]:
    out = _git(repo, "diff", "--name-only", "-z", "--no-renames", old, new).decode()
    return sorted(f for f in out.split("\0") if f)


def _module_file(binding: str) -> str:
    return binding.split(":", 1)[0].replace(".", "/") + ".py"


def changed_tools(old: LoadedAgent, new: LoadedAgent, files: list[str]) -> tuple[list[str], list[str]]:
    """(tools whose schema changed or that appeared/disappeared, tools whose implementation changed)."""
    schema, impl = [], []
    for name in sorted(set(old.tools) | set(new.tools)):
        o, n = old.tools.get(name), new.tools.get(name)
        if o is None or n is None or o.description.input_schema != n.description.input_schema:
            schema.append(name)
            continue
        code = [f for f in files if f.startswith("tools/")]
        own = _module_file(n.source) if n.source.startswith("tools.") else None
        helper_changed = any(f != own and f.endswith(".py") for f in code)  # a shared helper: every tool may change
        if o.source != n.source or (own in files) or (helper_changed and n.source.startswith("tools.")):
            impl.append(name)
    return schema, impl


def classify(old: LoadedAgent, new: LoadedAgent, files: list[str]) -> tuple[list[str], list[str], list[str], list[str]]:
    """(replayable kinds, files whose effect is not replayable, schema tools, implementation tools)."""
    kinds: list[str] = []
    mw_old = [(b.binding, b.params) for b in old.config.middleware]
    mw_new = [(b.binding, b.params) for b in new.config.middleware]
    if mw_old != mw_new or any(f.startswith("middleware/") for f in files):
        kinds.append("middleware")
    schema, impl = changed_tools(old, new, files)
    if schema:
        kinds.append("tool_schema")
    if impl:
        kinds.append("tool_implementation")
    if old.config.max_turns != new.config.max_turns:
        kinds.append("limits")
    text = []
    prompt = {str(old.prompt_path.relative_to(old.root)), "LongTermMEMORY.md"}
    for f in files:
        if f in prompt or f.startswith(("skills/", "sub_agents/")):
            text.append(f)
        elif f.startswith("tool_descriptions/"):
            name = Path(f).name.split(".")[0]
            o, n = old.tools.get(name), new.tools.get(name)
            if o is None or n is None or o.description.description != n.description.description:
                text.append(f)
    return kinds, text, schema, impl
