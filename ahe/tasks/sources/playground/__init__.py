"""SWE-Playground: synthetic projects → verified tasks (DESIGN.md §11.3, docs/playground.md).

`derive` turns projects (reference code + tests + task list) into implement / library / fix /
reproduce task folders without a model; `generate` makes the projects with a model first.
"""

from ahe.tasks.sources.source_types import TaskSourceInfo, register_source


def _make(argument: str):
    from ahe.tasks.sources.playground.source import PlaygroundSource

    return PlaygroundSource(argument)


register_source(TaskSourceInfo(
    name="playground",
    summary="SWE-Playground tasks derived from projects: playground:DIR[?split=train|holdout&holdout=0.3]",
    make=_make))
