"""The `folder` source: task folders that already exist on disk (the default)."""

from __future__ import annotations

from pathlib import Path

from ahe.errors import ConfigError
from ahe.tasks.sources.source_types import TaskSourceInfo, register_source


class FolderSource:
    """A folder of task folders, or one task folder; nothing is copied."""

    name = "folder"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()

    def describe(self) -> str:
        return f"task folders under {self.path}"

    def produce(self, out: Path) -> Path:
        if not self.path.is_dir():
            raise ConfigError(f"{self.path}: tasks folder does not exist; pass a folder of task folders.")
        return self.path.resolve()


register_source(TaskSourceInfo(name="folder", summary="a folder of Harbor-format task folders (the default)", make=FolderSource))
