"""The `swe-ci` task source: `--tasks swe-ci:ARG` in `ahe eval` / `ahe evolve`.

ARG is either a CSV of `repo,base,target` rows (tasks made from git repositories, as
`ahe tasks make swe-ci --csv`) or the root of the published SWE-CI dataset (metadata/ and
data/, imported for the docker backend as `ahe tasks import swe-ci`). Tasks already written
under the source's folder are kept, so a resumed run does not make them again.
"""

from __future__ import annotations

from pathlib import Path

from ahe.errors import ConfigError
from ahe.tasks.sources.source_types import TaskSourceInfo, register_source


class SweCiSource:
    name = "swe-ci"

    def __init__(self, argument: str) -> None:
        if not argument:
            raise ConfigError("--tasks swe-ci:ARG needs ARG: a CSV of repo,base,target or the published dataset's root.")
        self.path = Path(argument).expanduser()

    def describe(self) -> str:
        kind = "published SWE-CI dataset" if (self.path / "metadata").is_dir() else "repo,base,target CSV"
        return f"SWE-CI evolution tasks from the {kind} {self.path}"

    def produce(self, out: Path) -> Path:
        if (self.path / "metadata").is_dir():
            from ahe.tasks.sources.swe_ci.published import import_dataset, read_metadata

            rows = read_metadata(self.path / "metadata" / "default.csv")
            todo = [r["task_id"] for r in rows if not (out / r["task_id"] / "tests" / "expected.json").is_file()]
            if todo:
                import_dataset(self.path, out, only=todo, force=True)
            return out
        from ahe.tasks.sources.swe_ci.maker import default_name, make_task, read_batch

        for row in read_batch(self.path):
            repo = (self.path.parent / row["repo"]).resolve()
            name = row["name"] or None
            if (out / (name or default_name(repo, row["base"], row["target"])) / "tests" / "expected.json").is_file():
                continue
            make_task(repo, row["base"], row["target"], out, name=name, force=True)
        return out


register_source(TaskSourceInfo(
    name="swe-ci", summary="SWE-CI evolution tasks: a repo,base,target CSV or the published dataset root",
    make=SweCiSource))
