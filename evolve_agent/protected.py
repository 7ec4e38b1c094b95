"""The protected parts of a harness, checked against the commit the evolve phase started from.

- the `llm` block of the top-level agent.yaml (same effective settings, and present exactly
  when it was present) — the base model's sampling is what stays fixed while the harness
  evolves; the `system_prompt` key too, since the seed block lives in that file;
- the seed block of the system prompt: the text from `<!-- seed:begin -->` to
  `<!-- seed:end -->` as it was at the base, present verbatim exactly once (text may be added
  around it);
- the `backend` of harness.yaml (docs/backends.md): the agent that runs the harness is fixed for a
  run; a harness another backend runs has no agent.yaml to protect, but its backend names the
  keys that play the llm block's part (`protected_keys`: e.g. a mini-swe-agent config's
  model_kwargs, a command agent's llm and max_requests), which must stay as they were;
- `.gitignore` (it decides what a commit can see) and anything under `.git/`;
- nothing outside the workspace: no symlink that resolves outside the workspace folder.

The same checks run at three points: in the write tools (the edit is refused), in
`record_change` (the change is refused) and in the validation gate (the change is rejected).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from ahe.llm.types import LLMSettings

GIT_NAMES = (".git", ".gitignore", ".gitattributes", ".gitmodules")
SEED_BEGIN = "<!-- seed:begin -->"
SEED_END = "<!-- seed:end -->"
AGENT_FILE = "agent.yaml"
HARNESS_FILE = "harness.yaml"  # = ahe.agents.HARNESS_FILE
PROTECTED_KEYS = ("llm", "system_prompt")


def seed_block(text: str) -> str | None:
    """The seed block (markers included), or None when the text has none."""
    start = text.find(SEED_BEGIN)
    if start < 0:
        return None
    end = text.find(SEED_END, start)
    if end < 0:
        return None
    return text[start : end + len(SEED_END)]


def _llm(value: Any) -> dict[str, Any] | str:
    try:
        return LLMSettings.model_validate(value or {}).model_dump()
    except Exception as exc:  # an invalid llm block is a change of it
        return f"invalid ({exc.__class__.__name__})"


def _backend(text: str | None) -> str | None:
    """The `backend` harness.yaml names; "ahe" when the file has none; None when there is no file."""
    if text is None:
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return "(unreadable harness.yaml)"
    value = data.get("backend", "ahe") if isinstance(data, dict) else "(not a mapping)"
    return value if isinstance(value, str) else repr(value)


def _key_values(text: str | None, keys: list[str]) -> list[str]:
    """Each dotted key's value in a YAML text, as canonical JSON ("<absent>" when missing)."""
    import json

    try:
        data = yaml.safe_load(text) if text is not None else None
    except yaml.YAMLError:
        return ["<unreadable>"] * len(keys)
    out = []
    for key in keys:
        node: Any = data
        for part in key.split("."):
            node = node.get(part, "<absent>") if isinstance(node, dict) else "<absent>"
        out.append(json.dumps(node, sort_keys=True, default=str))
    return out


def _protected_keys(read: Callable[[str], str | None]) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """Another backend's protected keys with their values at the base (`ahe`'s are the checks above)."""
    text = read(HARNESS_FILE)
    name = _backend(text)
    if name is None or name == "ahe":
        return ()
    from ahe.agents import make_agent_backend
    from ahe.errors import AheError

    try:
        settings = yaml.safe_load(text) or {}
        keys = make_agent_backend(name).protected_keys({k: v for k, v in settings.items() if k != "backend"})
    except (AheError, yaml.YAMLError, AttributeError):
        return ()
    return tuple((f, tuple(zip(ks, _key_values(read(f), ks)))) for f, ks in sorted(keys.items()))


@dataclass(frozen=True)
class BaseSnapshot:
    """What the protected parts looked like at the base commit."""

    has_llm: bool
    llm: dict[str, Any] | str
    system_prompt: str  # the prompt path named by agent.yaml (default systemprompt.md)
    has_system_prompt_key: bool
    seed: str | None  # the seed block of that prompt, when it has one
    gitignore: str | None
    has_agent_file: bool = True  # False for a harness another agent backend runs (no agent.yaml)
    backend: str | None = None  # harness.yaml's backend at the base (None: no harness.yaml)
    # another backend's protected keys: file -> {dotted key: its value at the base}
    protected_keys: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    @classmethod
    def from_reader(cls, read: Callable[[str], str | None]) -> "BaseSnapshot":
        """`read(relative path)` gives a file's text at the base, or None when it is absent."""
        data: dict[str, Any] = {}
        raw = read(AGENT_FILE)
        if raw is not None:
            try:
                loaded = yaml.safe_load(raw)
                data = loaded if isinstance(loaded, dict) else {}
            except yaml.YAMLError:
                data = {}
        prompt_path = str(data.get("system_prompt") or "systemprompt.md")
        prompt = read(prompt_path)
        return cls(
            has_llm="llm" in data,
            llm=_llm(data.get("llm")),
            system_prompt=prompt_path,
            has_system_prompt_key="system_prompt" in data,
            seed=seed_block(prompt) if prompt is not None else None,
            gitignore=read(".gitignore"),
            has_agent_file=raw is not None,
            backend=_backend(read(HARNESS_FILE)),
            protected_keys=_protected_keys(read),
        )

    @classmethod
    def from_commit(cls, repo: Any, commit: str) -> "BaseSnapshot":
        """`repo` is a HarnessRepo; files are read exactly (trailing newlines included)."""
        import git

        def read(rel: str) -> str | None:
            try:
                return repo.repo.git.show(f"{commit}:{rel}", strip_newline_in_stdout=False)
            except git.GitCommandError:
                return None

        return cls.from_reader(read)

    # ------------------------------------------------------------------ checks
    def check_agent_yaml(self, text: str | None) -> str | None:
        """None when agent.yaml keeps the protected keys; else one sentence saying what changed."""
        if text is None:
            if not self.has_agent_file:
                return None  # another backend's harness: nothing here to protect
            return f"{AGENT_FILE} was deleted; it is the harness's registry and may not be removed"
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            return f"{AGENT_FILE} is not valid YAML{where}, so its protected llm block cannot be verified"
        if not isinstance(data, dict):
            return f"{AGENT_FILE} must stay a mapping of keys"
        if ("llm" in data) != self.has_llm or _llm(data.get("llm")) != self.llm:
            return (
                f"the llm block of {AGENT_FILE} is protected and must stay exactly {self.llm!r}"
                f"{'' if self.has_llm else ' (absent)'}; leave it as it was"
            )
        if ("system_prompt" in data) != self.has_system_prompt_key or str(data.get("system_prompt") or "systemprompt.md") != self.system_prompt:
            return f"the system_prompt key of {AGENT_FILE} is protected (it must stay {self.system_prompt!r}); add text to that file instead"
        return None

    def check_prompt(self, text: str | None) -> str | None:
        if self.seed is None:
            return None
        if text is None:
            return f"{self.system_prompt} was deleted; it holds the protected seed block"
        count = text.count(self.seed)
        if count == 1:
            return None
        if count > 1:
            return f"the seed block of {self.system_prompt} appears {count} times; keep exactly one copy, unchanged"
        return (
            f"the seed block of {self.system_prompt} (from {SEED_BEGIN} to {SEED_END}) was altered or removed; "
            "it is protected: keep it verbatim and add your text before or after it"
        )

    def check_file(self, rel: str, text: str | None) -> str | None:
        """The protection rule for one workspace file with its new text (None = deleted)."""
        if rel.startswith("./"):
            rel = rel[2:]
        if rel == AGENT_FILE:
            return self.check_agent_yaml(text)
        if rel == self.system_prompt:
            return self.check_prompt(text)
        for name, keys in self.protected_keys:
            if rel == name:
                values = _key_values(text, [k for k, _ in keys])
                changed = [k for (k, before), now in zip(keys, values) if now != before]
                if changed:
                    return (f"{', '.join(changed)} in {rel} {'is' if len(changed) == 1 else 'are'} protected for the "
                            f"{self.backend} backend (the base model's settings and budget stay fixed); leave "
                            f"{'it' if len(changed) == 1 else 'them'} as at the base")
                if rel != HARNESS_FILE:
                    return None
        if rel == HARNESS_FILE:
            if self.backend is None and text is None:
                return None
            if (_backend(text) if text is not None else None) != self.backend:
                now = _backend(text) if text is not None else None
                return (f"{HARNESS_FILE} changes the agent backend from {self.backend or 'ahe'!r} to {now or 'ahe'!r}; "
                        "the backend is fixed for a run (start a new run for another agent)")
            return None
        if rel == ".gitignore":
            if text != self.gitignore:
                return ".gitignore is protected (it decides what a commit records); leave it as it was"
            return None
        hit = next((part for part in rel.split("/") if part in GIT_NAMES), None)
        if hit is not None:
            return f"{rel}: {hit} files and folders are managed by AHE (history, ignore and attribute rules)"
        return None

    def check_tree(self, root: Path, files: list[str] | None = None) -> list[str]:
        """Every violation in the workspace folder `root` (optionally only among `files`)."""
        root = Path(root)
        errors = []

        def read(rel: str) -> str | None:
            p = root / rel
            if not os.path.lexists(p):
                return None
            return _safe_text(p, root)

        errors += config_path_problems(root)
        targets = {AGENT_FILE, self.system_prompt, ".gitignore", HARNESS_FILE} | {n for n, _ in self.protected_keys}
        for rel in sorted(targets):
            problem = self.check_file(rel, read(rel))
            if problem:
                errors.append(problem)
        for rel in files if files is not None else _all_files(root):
            problem = outside_link(root, rel) or (self.check_file(rel, "") if rel not in targets else None)
            if problem:
                errors.append(problem)
        return errors


def config_path_problems(root: Path) -> list[str]:
    """Paths in agent.yaml files (prompt, memory, tool descriptions, skills, sub-agent configs)
    that lead outside the workspace: the runtime would load them, so they must stay inside."""
    import posixpath

    root = Path(root)
    root_real = os.path.realpath(root)
    problems: list[str] = []
    seen: set[str] = set()

    def refs_of(data: dict[str, Any]) -> list[tuple[str, str]]:
        refs = [(k, data[k]) for k in ("system_prompt", "memory") if isinstance(data.get(k), str)]
        for t in data.get("tools") or []:
            if isinstance(t, dict) and isinstance(t.get("description"), str):
                refs.append((f"tools[{t.get('name')}].description", t["description"]))
        refs += [("skills", x) for x in data.get("skills") or [] if isinstance(x, str)]
        for sub in data.get("sub_agents") or []:
            if isinstance(sub, dict) and isinstance(sub.get("config"), str):
                refs.append((f"sub_agents[{sub.get('name')}].config", sub["config"]))
        return refs

    def visit(cfg_rel: str) -> None:
        if cfg_rel in seen or len(seen) > 50:
            return
        seen.add(cfg_rel)
        try:
            data = yaml.safe_load((root / cfg_rel).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            return  # the load check reports unreadable configs
        if not isinstance(data, dict):
            return
        folder = posixpath.dirname(cfg_rel)
        for key, value in refs_of(data):
            bad = os.path.isabs(value)
            resolved = []
            for base in {folder, ""}:
                norm = posixpath.normpath(posixpath.join(base, value))
                if norm == ".." or norm.startswith("../"):
                    bad = True
                else:
                    resolved.append(norm)
            if not bad:
                for norm in resolved:
                    real = os.path.realpath(root / norm)
                    if real != root_real and not real.startswith(root_real + os.sep):
                        bad = True
            if bad:
                problems.append(f"{cfg_rel}: {key} {value!r} points outside the workspace; every file the harness loads must be inside it")
            elif key.startswith("sub_agents["):
                for norm in resolved:
                    if (root / norm).is_file():
                        visit(norm)
                        break

    visit(AGENT_FILE)
    return problems


def _safe_text(p: Path, root: Path) -> str:
    """The file's text; "" when it is not a regular file inside `root` (so checks fail)."""
    real = os.path.realpath(p)
    if not real.startswith(os.path.realpath(root) + os.sep) or not os.path.isfile(real):
        return ""
    return Path(real).read_text(encoding="utf-8", errors="replace")


def _all_files(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git" and d != "__pycache__"]
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


def outside_link(root: Path, rel: str) -> str | None:
    """A message when `rel` (or a folder on its way) is a symlink resolving outside `root`."""
    root_real = os.path.realpath(root)
    p = os.path.join(root, rel)
    if not os.path.lexists(p):
        return None
    real = os.path.realpath(p)
    if real != root_real and not real.startswith(root_real + os.sep):
        return f"{rel} is a symlink pointing outside the workspace ({real}); nothing outside the workspace may be referenced"
    return None
