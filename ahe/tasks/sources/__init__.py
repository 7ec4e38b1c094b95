"""Task sources: the folder loader and generated sets (SWE-CI, SWE-Playground) behind one
small protocol. See `base` for the seam."""

from ahe.tasks.sources.base import (
    TaskSource,
    TaskSourceInfo,
    is_source_spec,
    open_source,
    register_source,
    resolve_tasks,
    source_infos,
)

__all__ = ["TaskSource", "TaskSourceInfo", "is_source_spec", "open_source", "register_source", "resolve_tasks", "source_infos"]
