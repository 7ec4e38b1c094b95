"""Step files of the corpus, packed: `<trial>/steps.md` holds every step, `index.md` maps them.

Creating one file per step made the corpus as slow as the file system's inode allocation
(200–1,300 µs a file on this VM's ext4 after a burst of deletions), so a session folder
(a trial, or a sub-agent run) holds its steps in one `steps.md`, each step byte for byte what
its own `step-NNN.md` used to hold, and its `index.md` gives each step's lines:

    step-014 steps.md:120-180 agent  t7 run_shell_command: pytest → exit 1: …

`corpus/<task>/<trial>/step-014.md` stays the name of that step everywhere — citations,
dedup references, replay summaries — and every reader that takes a corpus path (the
debugger's and the evolve agent's tools, the citation checks) resolves such a name to its
lines with the functions here. Line numbers inside a step (`step-014.md#L3-L9`) count from
the step's first line, as they did. A corpus built before the change (real step files) is
read as it is: a real file always wins.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable
from pathlib import Path

STEPS = "steps.md"
INDEX = "index.md"
_NAME = re.compile(r"^step-\d+\.md$")
_ENTRY = re.compile(r"^(step-\d+) steps\.md:(\d+)-(\d+)(?: |$)", re.MULTILINE)


def entry_line(name: str, first: int, last: int, rest: str) -> str:
    """One index line: `step-014 steps.md:120-180 <what happened>`."""
    return f"{name} {STEPS}:{first}-{last} {rest}"


def is_step_name(name: str) -> bool:
    return bool(_NAME.match(name))


def parse_table(index_text: str) -> dict[str, tuple[int, int]]:
    """{'step-014.md': (first line, last line)} from a session folder's index.md."""
    return {f"{m.group(1)}.md": (int(m.group(2)), int(m.group(3))) for m in _ENTRY.finditer(index_text)}


def slice_lines(steps_text: str, first: int, last: int) -> str:
    """Lines first..last (1-based, split on '\\n' only, as the builder counted) with their newlines."""
    lines = steps_text.split("\n")
    return "".join(line + "\n" for line in lines[first - 1:last])


def table_of(folder: Path | str) -> dict[str, tuple[int, int]]:
    """The step table of a session folder, {} when it has no packed steps (or no index)."""
    folder = str(folder)
    steps, index = os.path.join(folder, STEPS), os.path.join(folder, INDEX)
    if not os.path.isfile(steps) or os.path.islink(steps) or os.path.islink(index):
        return {}  # a link could lead out of the corpus: packed steps are read from plain files only
    try:
        with open(index, encoding="utf-8", errors="replace") as f:
            return parse_table(f.read())
    except OSError:
        return {}


def step_names(folder: Path | str) -> list[str]:
    """The step names of a session folder in order (`step-001.md`, …), packed or as files."""
    names = set(table_of(folder)) | {n for n in os.listdir(folder) if is_step_name(n)}
    return sorted(names, key=lambda n: int(n[5:-3]))


def packed_step(path: Path | str) -> tuple[Path, int, int] | None:
    """(steps.md, first, last) when `path` names a packed step that does not exist as a file."""
    path = Path(path)
    if not is_step_name(path.name) or os.path.lexists(path):
        return None
    span = table_of(path.parent).get(path.name)
    return (path.parent / STEPS, *span) if span else None


def read_text(path: Path | str) -> str:
    """A corpus file's text: the file itself, or a packed step's lines; FileNotFoundError else."""
    path = Path(path)
    if path.is_file():
        return path.read_text(encoding="utf-8", errors="replace")
    found = packed_step(path)
    if found is None:
        raise FileNotFoundError(f"{path} is neither a corpus file nor a step listed in its folder's index.md")
    steps, first, last = found
    return slice_lines(steps.read_text(encoding="utf-8", errors="replace"), first, last)


def exists(path: Path | str) -> bool:
    """A corpus file, a folder, or a packed step."""
    return os.path.exists(path) or packed_step(path) is not None


def line_namer(path: Path | str, shown: str) -> Callable[[int], str]:
    """Line number → `shown:N` for a file; for a steps.md, `<folder>/step-NNN.md:<line in that step>`.

    Search tools print hits this way, so a hit can be cited (and read back) as it is printed.
    """
    path = Path(path)
    table = table_of(path.parent) if path.name == STEPS else {}
    if not table:
        return lambda i: f"{shown}:{i}"
    starts = sorted((a, b, name) for name, (a, b) in table.items())
    firsts = [a for a, _, _ in starts]
    folder = shown.rsplit("/", 1)[0]

    def name(i: int) -> str:
        k = bisect.bisect_right(firsts, i) - 1
        if k >= 0 and i <= starts[k][1]:
            return f"{folder}/{starts[k][2]}:{i - starts[k][0] + 1}"
        return f"{shown}:{i}"
    return name
