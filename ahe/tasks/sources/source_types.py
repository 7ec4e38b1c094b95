"""What a task source is and the table sources register into: a leaf every source imports
(folder.py, playground/, swe_ci/source.py, plugins), so the lookup (base.py), which loads them,
is never imported back by them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable


@runtime_checkable
class TaskSource(Protocol):
    name: str

    def describe(self) -> str:
        """One line for listings: what this source gives and from where."""
        ...

    def produce(self, out: Path) -> Path:
        """Write (or locate) the Harbor-format task folders; return the folder holding them."""
        ...


@dataclass(frozen=True)
class TaskSourceInfo:
    name: str
    summary: str  # one line for `ahe tasks sources`
    make: Callable[[str], TaskSource]  # the argument after `NAME:`


SOURCES: dict[str, TaskSourceInfo] = {}


def register_source(info: TaskSourceInfo) -> TaskSourceInfo:
    SOURCES[info.name] = info
    return info
