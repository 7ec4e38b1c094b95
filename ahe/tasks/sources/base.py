"""The task-source seam: where task folders come from (DESIGN.md §11.3).

A source writes (or finds) Harbor-format task folders; nothing downstream knows where a task
came from. `--tasks` and the config's `tasks:` take either a folder (the `folder` source) or
`NAME:ARGUMENT` naming a registered source, e.g. `swe-ci:tasks.csv`.

Adding a source is one module plus one registration::

    from ahe.tasks.sources import TaskSourceInfo, register_source
    register_source(TaskSourceInfo(name="mine", summary="...", make=MySource))   # make(argument)

A source's `produce(out)` writes its task folders under `out` (a folder AHE gives it and
keeps: `<run>/tasks-source/<name>/`), must be idempotent so a resumed run can call it again,
and returns the folder that holds them.
"""

from __future__ import annotations

import re
from pathlib import Path

from ahe.errors import AheError
from ahe.tasks.sources.source_types import SOURCES, TaskSource, TaskSourceInfo, register_source

__all__ = ["TaskSource", "TaskSourceInfo", "is_source_spec", "open_source", "register_source", "resolve_tasks",
           "source_infos"]
_SPEC = re.compile(r"^(?P<name>[a-z][a-z0-9_-]*):(?P<arg>.*)$")


def _ensure_loaded() -> None:
    from ahe.sandbox.registry import backend_names

    backend_names()  # loads AHE_PLUGINS / entry points, which may register sources too
    from ahe.tasks.sources import folder, playground  # noqa: F401 - the built-in sources
    from ahe.tasks.sources.swe_ci import source  # noqa: F401 - SWE-CI evolution tasks


def source_infos() -> list[TaskSourceInfo]:
    _ensure_loaded()
    return [SOURCES[n] for n in sorted(SOURCES)]


def is_source_spec(spec: str | Path) -> bool:
    """True when `spec` reads `NAME:ARGUMENT` for a registered source (and is not a folder)."""
    text = str(spec)
    m = _SPEC.match(text)
    if m is None or Path(text).exists():
        return False
    _ensure_loaded()
    return m.group("name") in SOURCES


def open_source(spec: str | Path) -> TaskSource:
    """The source behind a `--tasks` value: a registered `NAME:ARGUMENT`, else a folder."""
    _ensure_loaded()
    text = str(spec)
    m = _SPEC.match(text)
    if m is not None and not Path(text).exists():
        info = SOURCES.get(m.group("name"))
        if info is None:
            raise AheError(
                f"--tasks {text}: no folder by that name and no task source called {m.group('name')!r}; "
                f"sources: {', '.join(sorted(SOURCES))}"
            )
        return info.make(m.group("arg"))
    return SOURCES["folder"].make(text)


def resolve_tasks(spec: str | Path, cache: Path) -> Path:
    """The folder of task folders for `spec`, produced under `cache/<source>/` when needed."""
    source = open_source(spec)
    return source.produce(Path(cache) / source.name)
