"""Composing harnesses by component class: "seed + only C" and "evolved − C" for ablations.

A harness is a folder of files plus one registry (`agent.yaml`). Each changed file belongs to
the component class its path names (`ahe.report.diff.component_of`); each part of the registry
belongs to a class too:

    memory                         long_term_memory
    middleware: [...]              middleware        (the whole list: order is behaviour)
    skills: [...]                  skill
    sub_agents: [...]              sub_agent
    tools: [...] per tool          a new or removed tool, or a changed binding → tool_implementation;
                                   a changed description path → tool_description
    max_turns, stop_tools, ...     other

`compose(seed, evolved, take)` starts from the seed and takes, for every class in `take`, the
evolved version of that class's files and registry parts. "seed + only C" is `take={C}`,
"evolved − C" is every changed class but C. A file the composed registry needs but that
belongs to another class (a new tool's description under tool_implementation, a skill folder
referenced by a kept registration) is taken from the harness that has it, and said so in
`notes`, so every composed folder is a complete workspace.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import yaml

from ahe.report.diff import component_of
from ahe.harness.manifest import Component

CLASSES: tuple[str, ...] = get_args(Component)  # the manifest's component classes, in their order
OTHER = "other"
AGENT = "agent.yaml"
SKIP_DIRS = (".git", "__pycache__")
LIST_KEYS = {"middleware": "middleware", "skills": "skill", "sub_agents": "sub_agent", "memory": "long_term_memory"}
FIXED_KEYS = ("llm", "system_prompt")  # protected: always the seed's


def read_tree(root: Path) -> dict[str, bytes]:
    """Every file of a workspace folder (relative path → bytes), without .git and caches."""
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in filenames:
            p = Path(dirpath) / name
            if name.endswith(".pyc"):
                continue
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


def tree_hash(root: Path) -> str:
    """Content hash of a workspace folder: equal folders evaluate once."""
    h = hashlib.sha256()
    for rel, data in sorted(read_tree(root).items()):
        h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()[:16]


def _registry(root: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load((root / AGENT).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _tools(reg: dict[str, Any]) -> dict[str, dict]:
    return {t["name"]: t for t in reg.get("tools") or [] if isinstance(t, dict) and "name" in t}


def registry_classes(seed: dict[str, Any], evolved: dict[str, Any]) -> dict[str, list[str]]:
    """Class → the registry parts (keys, tool names) the evolved harness changed."""
    out: dict[str, list[str]] = {}
    for key in sorted(set(seed) | set(evolved)):
        if key in FIXED_KEYS or key == "tools" or seed.get(key) == evolved.get(key):
            continue
        out.setdefault(LIST_KEYS.get(key, OTHER), []).append(key)
    st, et = _tools(seed), _tools(evolved)
    for name in list(et) + [n for n in st if n not in et]:
        s, e = st.get(name), et.get(name)
        if s is None or e is None or s.get("binding") != e.get("binding"):
            out.setdefault("tool_implementation", []).append(f"tools[{name}]")
        if s is not None and e is not None and s.get("description") != e.get("description"):
            out.setdefault("tool_description", []).append(f"tools[{name}].description")
    return out


@dataclass
class HarnessDiff:
    """What the evolved harness changed against the seed, by component class."""

    files: dict[str, list[str]] = field(default_factory=dict)  # class → changed paths
    registry: dict[str, list[str]] = field(default_factory=dict)  # class → changed registry parts

    @property
    def classes(self) -> list[str]:
        found = set(self.files) | set(self.registry)
        return [c for c in (*CLASSES, OTHER) if c in found]


def diff_harnesses(seed: Path, evolved: Path) -> HarnessDiff:
    a, b = read_tree(seed), read_tree(evolved)
    d = HarnessDiff()
    for rel in sorted(set(a) | set(b)):
        if rel == AGENT or a.get(rel) == b.get(rel):
            continue
        cls = component_of(rel)
        d.files.setdefault(cls if cls in CLASSES else OTHER, []).append(rel)
    d.registry = registry_classes(_registry(seed), _registry(evolved))
    return d


def merge_registry(seed: dict[str, Any], evolved: dict[str, Any], take: set[str]) -> dict[str, Any]:
    """The seed's agent.yaml with the registry parts of the classes in `take` from the evolved one."""
    out: dict[str, Any] = {}
    for key in list(seed) + [k for k in evolved if k not in seed]:
        cls = LIST_KEYS.get(key, OTHER)
        if key in FIXED_KEYS or key == "tools" or cls not in take:
            if key in seed:
                out[key] = seed[key]
        elif key in evolved:
            out[key] = evolved[key]
    st, et = _tools(seed), _tools(evolved)
    impl, desc = "tool_implementation" in take, "tool_description" in take
    tools = []
    for name in list(et) + [n for n in st if n not in et]:
        s, e = st.get(name), et.get(name)
        if s is None:  # a new tool is code: it comes with tool_implementation
            if impl:
                tools.append(dict(e))
            continue
        if e is None:  # a removed tool
            if not impl:
                tools.append(dict(s))
            continue
        entry = dict(s)
        if impl:
            entry["binding"] = e["binding"]
        if desc:
            entry["description"] = e["description"]
        tools.append(entry)
    if tools or "tools" in seed:
        out["tools"] = tools
    return out


def _needed(reg: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, what needs it) for every file or folder the registry loads."""
    need = [(str(reg[k]), k) for k in ("memory",) if isinstance(reg.get(k), str)]
    for t in reg.get("tools") or []:
        if isinstance(t, dict):
            need.append((str(t.get("description")), f"tools[{t.get('name')}].description"))
            need.append((_module_file(str(t.get("binding", ""))), f"tools[{t.get('name')}].binding"))
    for m in reg.get("middleware") or []:
        if isinstance(m, dict):
            need.append((_module_file(str(m.get("binding", ""))), f"middleware {m.get('binding')}"))
    need += [(str(s), "skills") for s in reg.get("skills") or []]
    need += [(str(s.get("config")), f"sub_agents[{s.get('name')}]") for s in reg.get("sub_agents") or [] if isinstance(s, dict)]
    return [(p, why) for p, why in need if p and p != "None"]


def _module_file(binding: str) -> str:
    module = binding.partition(":")[0]
    return module.replace(".", "/") + ".py" if module else ""


@dataclass
class Composition:
    path: Path
    take: list[str]
    notes: list[str] = field(default_factory=list)


def compose(seed: Path, evolved: Path, take: set[str], diff: HarnessDiff, dest: Path) -> Composition:
    """Write the seed plus the classes in `take` from the evolved harness into `dest` (replaced)."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(seed, dest, ignore=shutil.ignore_patterns(*SKIP_DIRS, "*.pyc"))
    comp = Composition(dest, sorted(take, key=lambda c: (*CLASSES, OTHER).index(c)))
    for cls in take:
        for rel in diff.files.get(cls, []):
            _copy(evolved, dest, rel)
    s_reg, e_reg = _registry(seed), _registry(evolved)
    merged = merge_registry(s_reg, e_reg, take)
    if merged == e_reg:
        shutil.copyfile(evolved / AGENT, dest / AGENT)
    elif merged != s_reg:
        (dest / AGENT).write_text("# composed by `ahe ablate` (docs/ablation.md)\n" + yaml.safe_dump(merged, sort_keys=False))
    for rel, why in _needed(merged):
        rel = rel.strip("/")
        if (dest / rel).exists() or rel.startswith(".."):
            continue
        source = evolved if (evolved / rel).exists() else seed
        if (source / rel).exists():
            _copy(source, dest, rel)
            comp.notes.append(f"{rel} taken from the {'evolved' if source == evolved else 'seed'} harness: {why} needs it")
    return comp


def _copy(src_root: Path, dest_root: Path, rel: str) -> None:
    src, dst = src_root / rel, dest_root / rel
    if dst.is_dir() and not dst.is_symlink():
        shutil.rmtree(dst)
    elif dst.exists() or dst.is_symlink():
        dst.unlink()
    if src.is_dir():
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*SKIP_DIRS, "*.pyc"))
    elif src.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    else:  # the file does not exist in the source: it was added by the other side
        _prune_empty(dst.parent, dest_root)


def _prune_empty(folder: Path, root: Path) -> None:
    while folder != root and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


async def validate(root: Path, seed: Path) -> list[str]:
    """The validation gate's checks on a composed folder: protected parts, loading, smoke session."""
    from evolve_agent.protected import BaseSnapshot
    from evolve_agent.smoke import smoke_check
    from evolve_agent.workspace_load import probe_problem

    def read(rel: str) -> str | None:
        f = Path(seed) / rel
        return f.read_text(encoding="utf-8") if f.is_file() else None

    errors = BaseSnapshot.from_reader(read).check_tree(root)
    problem = probe_problem(root)
    report = None if problem else await smoke_check(root)  # its worker's load is the load check
    problem = problem or (report.load_problem if report else None)
    if problem:
        return errors + [f"the workspace does not load: {problem}"]
    return errors + [f"smoke: {e}" for e in report.errors]
