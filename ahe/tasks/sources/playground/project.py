"""A SWE-Playground project on disk: reference code, tests, and the tasks it was built from.

```
project/
  playground.toml     [project] name, description, package; [[tasks]] name, title,
                      description, functions = ["pkg/mod.py:func", "pkg/mod.py:Class.method"]
  <package>/          the reference implementation (or src/<package>/, a src layout)
  tests/test_<task>.py   each task's unit tests (unittest)
```

Tasks are listed in the order they were built; `implement` tasks rely on that order.
Both the bundled seed projects and the generator's output use this layout.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ahe.errors import AheError

MANIFEST = "playground.toml"
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_FUNC = re.compile(r"^[\w/.-]+\.py:[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$")


class TaskSpec(BaseModel):
    """One pull-request-sized task of a project."""

    model_config = ConfigDict(extra="forbid")

    name: str
    title: str
    description: str
    functions: list[str] = Field(min_length=1)  # "pkg/mod.py:func" or "pkg/mod.py:Class.method"

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"task name {v!r} must be lower-case letters, digits, '-' or '_'")
        return v

    @field_validator("functions")
    @classmethod
    def _functions(cls, v: list[str]) -> list[str]:
        for f in v:
            if not _FUNC.match(f):
                raise ValueError(f"function {f!r} must look like 'pkg/module.py:name' or 'pkg/module.py:Class.name'")
        return v

    @property
    def test_file(self) -> str:
        return f"tests/test_{self.name.replace('-', '_')}.py"

    @property
    def test_module(self) -> str:
        return self.test_file[:-3].replace("/", ".")

    def files(self) -> list[str]:
        return sorted({f.split(":", 1)[0] for f in self.functions})


class ProjectInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    package: str
    language: str = "python"
    runner: str = Field(default="auto", pattern="^(auto|pytest|unittest)$")  # auto: detected from the project
    requirements: list[str] | None = None  # the tests' packages (None: what the project declares)
    setup: str | None = None  # a shell command that completes the test environment

    @field_validator("name", "package")
    @classmethod
    def _ident(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"{v!r} must be lower-case letters, digits, '-' or '_'")
        return v


class Project(BaseModel):
    """A loaded project; `root` is the folder holding playground.toml."""

    model_config = ConfigDict(extra="forbid")

    project: ProjectInfo
    tasks: list[TaskSpec] = Field(min_length=1)
    root: Path = Path(".")
    # files the project's build adds (a version file, its metadata; buildfiles.py), found at derive time
    build_files: dict[str, str] = Field(default_factory=dict, exclude=True)

    @property
    def name(self) -> str:
        return self.project.name

    @property
    def package(self) -> str:
        return self.project.package

    @property
    def package_dir(self) -> str:
        """Where the package is, relative to the root: `<package>` or, in a src/ layout, `src/<package>`."""
        if not (self.root / self.package / "__init__.py").is_file() and (self.root / "src" / self.package / "__init__.py").is_file():
            return f"src/{self.package}"
        return self.package

    def modules(self) -> list[str]:
        """Python files of the package that hold functions of some task, in task order."""
        seen: list[str] = []
        for t in self.tasks:
            for f in t.files():
                if f not in seen:
                    seen.append(f)
        return seen

    def source_files(self) -> list[str]:
        """Every .py file of the package, relative to the root."""
        pkg = self.root / self.package_dir
        return sorted(str(p.relative_to(self.root)) for p in pkg.rglob("*.py") if "__pycache__" not in p.parts)

    def data_files(self) -> tuple[list[str], list[str]]:
        """(text, skipped) non-Python files the code and tests need: the package's data files
        and whatever tests/ holds besides its top-level .py files (fixtures, sub-folders).
        Binary files cannot travel in a task's text files and are skipped (the second list)."""
        found = [p for p in (self.root / self.package_dir).rglob("*") if p.suffix not in (".py", ".pyc")]
        tests = self.root / "tests"
        if tests.is_dir():
            found += [p for p in tests.rglob("*") if not (p.parent == tests and p.suffix in (".py", ".pyc"))]
        text, skipped = [], []
        for p in sorted(found):
            if not p.is_file() or "__pycache__" in p.parts:
                continue
            rel = str(p.relative_to(self.root))
            try:
                p.read_text(encoding="utf-8")
                text.append(rel)
            except (UnicodeDecodeError, ValueError):
                skipped.append(rel)
        return text, skipped

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text(encoding="utf-8")


def _where(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
    return f"field `{loc}`: {err['msg']}"


def load_project(root: str | Path) -> Project:
    """Load and check a project folder; AheError names the file and field on bad input."""
    root = Path(root)
    manifest = root / MANIFEST
    if not manifest.is_file():
        raise AheError(f"{manifest}: file is missing; a playground project needs a {MANIFEST} "
                       "with [project] and [[tasks]] (see docs/playground.md).")
    try:
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise AheError(f"{manifest}: not valid TOML ({exc}); fix the syntax there.") from None
    try:
        project = Project.model_validate({**data, "root": root.resolve()})
    except ValidationError as exc:
        raise AheError(f"{manifest}: {_where(exc)}; fix it and run again.") from None
    problems = _check_files(project)
    if problems:
        raise AheError(f"{manifest}: {problems[0]}; fix it and run again.")
    return project


def _check_files(project: Project) -> list[str]:
    out = []
    names = [t.name for t in project.tasks]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        out.append(f"task name {sorted(dup)[0]!r} is used twice")
    if not (project.root / project.package_dir / "__init__.py").is_file():
        out.append(f"package `{project.package}` has no {project.package}/__init__.py (nor src/{project.package}/__init__.py)")
    for t in project.tasks:
        if not (project.root / t.test_file).is_file():
            out.append(f"task {t.name!r}: its tests {t.test_file} are missing")
        for f in t.files():
            if not (project.root / f).is_file():
                out.append(f"task {t.name!r}: function file {f} does not exist")
    return out


def find_projects(paths: list[Path]) -> list[Path]:
    """Each path is a project folder or a folder of project folders (sorted by name)."""
    found: list[Path] = []
    for p in paths:
        if (p / MANIFEST).is_file():
            found.append(p)
        elif p.is_dir():
            found += sorted(d for d in p.iterdir() if (d / MANIFEST).is_file())
    return found
