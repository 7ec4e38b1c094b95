"""`ahe tasks derive`: projects → a verified task set (with an optional held-out split).

Without a split the tasks are written straight into OUT; with `--holdout` they go to
OUT/train and OUT/holdout, by project. OUT/derive.json records every emitted task, every
rejected candidate with its reason, the split and the counts.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from ahe.errors import AheError
from ahe.io import atomic_write_json
from ahe.tasks.sources.playground.derive import DeriveLimits, ProjectDerivation, Rejected, derive_project
from ahe.tasks.sources.playground.emit import write_task
from ahe.tasks.sources.playground.project import find_projects, load_project
from ahe.tasks.sources.playground.runner import SandboxRunner
from ahe.tasks.sources.playground.splits import holdout_projects

LOG_FILE = "derive.json"


class EmittedTask(BaseModel):
    name: str
    kind: str
    project: str
    split: str
    path: str
    details: dict = Field(default_factory=dict)


class DeriveReport(BaseModel):
    """What derive.json holds."""

    projects: list[str]
    holdout: list[str] = Field(default_factory=list)
    tasks: list[EmittedTask] = Field(default_factory=list)
    rejected: list[Rejected] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    mutants_tried: int = 0
    test_runs: int = 0
    duration_sec: float = 0.0

    def split_dirs(self, out: Path) -> dict[str, Path]:
        return {"train": out / "train", "holdout": out / "holdout"} if self.holdout else {"all": out}


def _prepare_out(out: Path) -> None:
    """OUT must be new, empty, or an earlier derive's output (which is replaced)."""
    if not out.exists():
        out.mkdir(parents=True)
        return
    if not out.is_dir():
        raise AheError(f"--out {out} is a file; give a folder.")
    entries = [p for p in out.iterdir() if not p.name.startswith(".")]
    if entries and not (out / LOG_FILE).is_file():
        raise AheError(f"--out {out} is not empty and was not written by `ahe tasks derive`; "
                       "choose a new folder so nothing there is overwritten.")
    old = DeriveReport.model_validate_json((out / LOG_FILE).read_text()) if entries else None
    if old:
        for t in old.tasks:
            shutil.rmtree(out / t.path, ignore_errors=True)
        for d in ("train", "holdout"):
            if (out / d).is_dir() and not any((out / d).iterdir()):
                (out / d).rmdir()


def derive_task_set(project_paths: list[Path], out: Path, *, holdout: float = 0.0,
                    limits: DeriveLimits | None = None, concurrency: int = 2,
                    log: Callable[[str], None] = lambda s: None) -> DeriveReport:
    """Derive, verify and write the tasks of every project; returns (and writes) the report."""
    t0 = time.monotonic()
    roots = find_projects([Path(p) for p in project_paths])
    if not roots:
        raise AheError(f"--project {', '.join(map(str, project_paths))}: no playground.toml found there; "
                       "give a project folder or a folder of projects (see docs/playground.md).")
    projects = [load_project(r) for r in roots]
    names = [p.name for p in projects]
    if len(set(names)) != len(names):
        raise AheError(f"two projects are both named {sorted(n for n in names if names.count(n) > 1)[0]!r}; rename one in its playground.toml.")
    held = holdout_projects(names, holdout)
    _prepare_out(out)
    derivations = asyncio.run(_derive_all(projects, limits or DeriveLimits(), concurrency, log))
    report = DeriveReport(projects=names, holdout=held)
    for d in derivations:
        split = ("holdout" if d.project in held else "train") if held else "all"
        target = report.split_dirs(out)[split]
        target.mkdir(parents=True, exist_ok=True)
        for task in d.tasks:
            path = write_task(task, target)
            report.tasks.append(EmittedTask(name=task.name, kind=task.kind, project=d.project, split=split,
                                            path=str(path.relative_to(out)), details=task.details))
        report.rejected += d.rejected
        report.mutants_tried += d.mutants_tried
    report.test_runs = sum(d.test_runs for d in derivations)
    report.counts = dict(Counter(t.kind for t in report.tasks))
    report.duration_sec = round(time.monotonic() - t0, 2)
    atomic_write_json(out / LOG_FILE, report.model_dump(mode="json"))
    return report


async def _derive_all(projects, limits: DeriveLimits, concurrency: int, log) -> list[ProjectDerivation]:
    """One sandbox per project (its test environment mounted), projects one after the other."""
    out = []
    for p in projects:
        add_build_files(p, log)
        runner, env = project_environment(p, log)
        async with SandboxRunner(concurrency=concurrency, test_env=env, test_runner=runner) as sandbox:
            derivation = await derive_project(p, sandbox, limits, log)
        for task in derivation.tasks:
            task.grade["runner"] = runner
            task.test_env = str(env) if env else None
        out.append(derivation)
    return out


def project_environment(project, log) -> tuple[str, Path | None]:
    """The runner (pytest or unittest, detected unless playground.toml says) and the test
    environment (made once from the project's requirements) of a project's tests."""
    from ahe.tasks.sources.swe_ci.runner import detect_pytest
    from ahe.tasks.sources.testenv import declared_requirements, ensure_env

    info = project.project
    runner, why = info.runner, "set in playground.toml"
    if runner == "auto":
        found = detect_pytest(project.root, ["tests"])
        runner, why = ("pytest", found) if found else ("unittest", "no sign of pytest in the project")
    reqs = list(info.requirements) if info.requirements is not None else \
        declared_requirements(project.root, pytest=runner == "pytest")
    if runner == "pytest" and not any(r.split("=")[0].split("<")[0].split(">")[0].strip() == "pytest" for r in reqs):
        reqs.append("pytest")
    env = ensure_env(reqs, setup=info.setup, source_dir=project.root, log=log) if reqs or info.setup else None
    log(f"{project.name}: tests run by {runner} ({why})"
        + (f"; test environment {env.path} ({env.seconds:.1f} s)" if env else ""))
    return runner, env.path if env else None


def add_build_files(project, log) -> None:
    """What installing the project adds to its package — the version file its build writes,
    its metadata — found by building it once (buildfiles.py) and carried by every task."""
    from ahe.tasks.sources.buildfiles import build_files, has_build, tree_key

    if not has_build(project.root):
        return
    built = build_files(project.root, key=tree_key(project.root), label=f"the project {project.name}", log=log)
    if built.error:
        log(f"{built.error}\n({project.name}: its tests run from its source tree alone)")
        return
    top = str(Path(project.package_dir).parent)
    project.build_files = {rel: text for rel, text in built.texts().items()
                           if rel.startswith(project.package_dir + "/")
                           or (str(Path(rel).parent.parent) == top and Path(rel).parent.name.endswith(".dist-info"))}
    log(f"{project.name}: the build adds {', '.join(sorted(project.build_files)) or 'nothing the package uses'}"
        + (" (cached)" if built.reused else f" ({built.seconds:.1f} s)"))
