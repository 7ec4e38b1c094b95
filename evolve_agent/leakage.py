"""The leakage lint: no task names, expected outputs or verifier content in a harness change.

Only the lines a change *adds* are scanned. What counts as secret is a task's `tests/` and
`solution/` files; what a task states in `instruction.md` is public, and so is anything the
base harness already contained. Four rules (thresholds below; docs/evolve-agent.md):

1. **Task name** — a task's name (from task.toml, or its folder) as a whole token,
   case-insensitive. Only distinctive names count: at least 6 characters and containing
   `-`, `_` or a digit, or at least 12 characters ("fix-interval-merge" yes, "hello" no).
2. **Secret line** — a line of a secret file, whitespace-normalised, of at least 20
   characters, found inside an added line. Boilerplate never counts: comments, shebangs,
   `set -e`, imports, `if __name__ == ...`, reward-file plumbing, and any line that occurs in
   the secret files of two or more tasks.
3. **Secret block** — three consecutive non-boilerplate lines of a secret file (together at
   least 20 characters) added as three consecutive lines: this catches expected outputs made
   of short lines (`171<TAB>river` ...). A secret file of only two such lines is one block of
   two: otherwise a two-line expected output whose tokens hold few digits escaped every rule.
4. **Secret value** — a token of a secret file with at least 6 characters and 3 digits (an
   IP address, an amount, a timestamp, a key) found as a whole token. Plain identifiers such
   as `sha256` or `python311` and a few universal values (`127.0.0.1`) are ignored.
"""

from __future__ import annotations

import re
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from ahe.tasks.loader import task_folders

MIN_NAME_CHARS = 6
MIN_PLAIN_NAME_CHARS = 12
MIN_LINE_CHARS = 20
BLOCK_LINES = 3
MIN_BLOCK_CHARS = 20
MIN_VALUE_CHARS = 6
MIN_VALUE_DIGITS = 3
MAX_FILE_BYTES = 1024 * 1024
MAX_FILES_PER_TASK = 200
SECRET_DIRS = ("tests", "solution")
COMMON_VALUES = frozenset({
    "127.0.0.1", "0.0.0.0", "255.255.255.0", "255.255.255.255", "1970-01-01", "::1", "utf-8",
    "x86_64", "aarch64", "iso-8859-1", "0o644", "0o755", "0644", "0755", "1000", "2>&1",
})

_WS = re.compile(r"\s+")
_TOKEN = re.compile(r"[A-Za-z0-9_.:@/+=%$-]+")
_IDENTIFIER_WITH_NUMBER = re.compile(r"^[A-Za-z][A-Za-z_]{2,}\d{1,4}$")
_BOILERPLATE = re.compile(
    r"^(#|//|--|\"\"\"|''')"
    r"|^set -[a-z]+"
    r"|^(import|from)\s+[\w.]+"
    r"|^if __name__ ?== ?['\"]__main__['\"]"
    r"|unittest\.main\("
    r"|reward\.(txt|json)|/logs/verifier"
    r"|^(PY|EOF|EOT|END)$"
    r"|^(cd|mkdir -p) /(app|tests|logs|tmp)\S*$"
)


def normalise(line: str) -> str:
    return _WS.sub(" ", line).strip()


def is_boilerplate(norm: str) -> bool:
    return bool(_BOILERPLATE.search(norm))


_DIGITS = re.compile(r"\d")


def _is_value(token: str) -> bool:
    if len(token) < MIN_VALUE_CHARS or len(_DIGITS.findall(token)) < MIN_VALUE_DIGITS:
        return False
    if token.lower() in COMMON_VALUES or _IDENTIFIER_WITH_NUMBER.match(token):
        return False
    return True


def _tokens(text: str) -> set[str]:
    out = set()
    for m in _TOKEN.finditer(text):
        tok = m.group(0).strip(".:/-=+_@%$")
        if tok:
            out.add(tok)
    return out


def _name_counts(name: str) -> bool:
    if len(name) < MIN_NAME_CHARS:
        return False
    return any(c in name for c in "-_.") or any(c.isdigit() for c in name) or len(name) >= MIN_PLAIN_NAME_CHARS


@dataclass(frozen=True)
class Finding:
    rule: str  # task_name | secret_line | secret_block | secret_value
    task: str
    text: str
    source: str  # the task file it comes from ("task.toml" for names)
    where: str  # the harness file it was added to

    def message(self) -> str:
        shown = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        what = {
            "task_name": "the name of task",
            "secret_line": "a line of the verifier/solution of task",
            "secret_block": "lines of the expected output/verifier of task",
            "secret_value": "a value from the verifier/solution of task",
        }[self.rule]
        src = "" if self.rule == "task_name" else f" ({self.source})"
        return f"leakage in {self.where}: {what} {self.task}{src} was copied in: {shown!r}"


@dataclass
class _Task:
    name: str
    names: set[str]
    public: str
    secret: dict[str, str]  # relative path -> text


def _read_text(path: Path) -> str | None:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\x00" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def task_text(folder: Path) -> _Task:
    """A task's names, its public instruction and its secret files (tests/, solution/)."""
    names = {folder.name}
    try:
        with open(folder / "task.toml", "rb") as f:
            meta = tomllib.load(f)
        declared = str((meta.get("task") or {}).get("name") or "")
        if declared:
            names.add(declared.split("/")[-1])
    except (OSError, tomllib.TOMLDecodeError):
        pass
    public = _read_text(folder / "instruction.md") or ""
    secret: dict[str, str] = {}
    for sub in SECRET_DIRS:
        base = folder / sub
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            if len(secret) >= MAX_FILES_PER_TASK:
                break
            text = _read_text(p)
            if text is not None:
                secret[str(p.relative_to(folder))] = text
    name = sorted(names, key=len)[-1]
    return _Task(name=name, names=names, public=public, secret=secret)


class LeakIndex:
    """Everything secret about a task set, prepared once per gate run."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}  # lower-case name -> task
        self.lines: dict[str, tuple[str, str]] = {}  # normalised line -> (task, file)
        self.blocks: dict[tuple[str, ...], tuple[str, str]] = {}
        self.values: dict[str, tuple[str, str]] = {}
        self.n_tasks = 0

    @classmethod
    def from_tasks(cls, tasks_dir: Path | None, *, public_text: str = "") -> "LeakIndex":
        """`public_text`: text that is not secret however it got there (the base harness)."""
        index = cls()
        if tasks_dir is None:
            return index
        tasks = [task_text(f) for f in task_folders(Path(tasks_dir))]
        index.n_tasks = len(tasks)
        base_public = normalise(public_text)
        base_tokens = _tokens(public_text)

        line_tasks: dict[str, set[str]] = defaultdict(set)
        token_tasks: dict[str, set[str]] = defaultdict(set)
        per_task_lines: dict[str, list[tuple[str, list[str], set[str]]]] = {}
        for t in tasks:
            files = []
            for rel, text in t.secret.items():
                norm = [normalise(ln) for ln in text.splitlines()]
                values = {tok for tok in _tokens(text) if _is_value(tok)}
                files.append((rel, norm, values))
                for ln in set(norm):
                    if ln:
                        line_tasks[ln].add(t.name)
                for tok in values:
                    token_tasks[tok].add(t.name)
            per_task_lines[t.name] = files

        def shared(ln: str) -> bool:
            return len(line_tasks.get(ln, ())) >= 2

        for t in tasks:
            for n in t.names:
                if _name_counts(n):
                    index.names[n.lower()] = t.name
            public = normalise(t.public) + "\n" + base_public
            public_tokens = _tokens(t.public) | base_tokens
            for rel, norm, values in per_task_lines[t.name]:
                kept = [ln for ln in norm if ln and not is_boilerplate(ln) and not shared(ln)]
                for ln in kept:
                    if len(ln) >= MIN_LINE_CHARS and ln not in public:
                        index.lines.setdefault(ln, (t.name, rel))
                size = min(BLOCK_LINES, len(kept))  # a two-line file is one block of two
                for i in range(len(kept) - size + 1 if size >= 2 else 0):
                    block = tuple(kept[i : i + size])
                    if sum(len(x) for x in block) < MIN_BLOCK_CHARS or sum(len(x) >= 4 for x in block) < 2:
                        continue
                    if " ".join(block) in public:
                        continue
                    index.blocks.setdefault(block, (t.name, rel))
                for tok in values:
                    if tok not in public_tokens and len(token_tasks[tok]) < 2:
                        index.values.setdefault(tok, (t.name, rel))
        return index

    def lint(self, added: dict[str, list[str]]) -> list[Finding]:
        """Findings for the added lines of a change, {harness file: [added line, ...]}."""
        findings: list[Finding] = []
        seen: set[tuple[str, str]] = set()

        def add(f: Finding) -> None:
            if (f.rule, f.text) not in seen:
                seen.add((f.rule, f.text))
                findings.append(f)

        name_rx = None
        if self.names:
            alternatives = "|".join(re.escape(n) for n in sorted(self.names, key=len, reverse=True))
            name_rx = re.compile(rf"(?<![A-Za-z0-9_-])({alternatives})(?![A-Za-z0-9_-])", re.IGNORECASE)
        for where, lines in added.items():
            norm = [normalise(ln) for ln in lines]
            text = "\n".join(norm)
            if name_rx is not None:
                for m in name_rx.finditer(text):
                    task = self.names[m.group(1).lower()]
                    add(Finding("task_name", task, m.group(1), "task.toml", where))
            for secret, (task, rel) in self.lines.items():
                if secret in text:
                    add(Finding("secret_line", task, secret, rel, where))
            kept = [ln for ln in norm if ln and not is_boilerplate(ln)]
            for size in range(2, BLOCK_LINES + 1):
                for i in range(len(kept) - size + 1):
                    hit = self.blocks.get(tuple(kept[i : i + size]))
                    if hit:
                        add(Finding("secret_block", hit[0], " | ".join(kept[i : i + size]), hit[1], where))
            for tok in _tokens(text):
                hit = self.values.get(tok)
                if hit:
                    add(Finding("secret_value", hit[0], tok, hit[1], where))
        return findings


def added_lines(diff_text: str) -> dict[str, list[str]]:
    """{file: [added line, ...]} from a unified git diff."""
    out: dict[str, list[str]] = defaultdict(list)
    current = None
    for line in diff_text.splitlines():
        if line.startswith("+++ "):
            path = line[4:].strip()
            current = path[2:] if path.startswith("b/") else (None if path == "/dev/null" else path)
            continue
        if line.startswith("diff --git") or line.startswith("--- "):
            continue
        if current and line.startswith("+"):
            out[current].append(line[1:])
    return dict(out)
