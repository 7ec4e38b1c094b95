"""Deterministic derivation: projects in, verified Harbor task folders out (no model).

For each project every candidate is checked by running the tests in a local sandbox:
the reference must pass them all; an `implement` or `library` candidate is kept when the tests
it is graded on fail on its starting code; a mutant is a `fix` or `reproduce` task only when at
least one test catches it (fail-to-pass) while the reference passes all. Every candidate that
is not emitted is logged with its reason in derive.json.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from ahe.errors import AheError
from ahe.tasks.sources.playground import kinds
from ahe.tasks.sources.playground.emit import DerivedTask
from ahe.tasks.sources.playground.mutation import Mutant, interleave, mutants_of
from ahe.tasks.sources.playground.project import Project
from ahe.tasks.sources.playground.runner import RunResult, SandboxRunner
from ahe.tasks.sources.playground.stubbing import function_names, import_time_names, stub_source, stubbable


class DeriveLimits(BaseModel):
    """How many bug tasks per project, and how many mutants may be tried to find them."""

    max_fix: int = Field(default=6, ge=0)
    max_reproduce: int = Field(default=3, ge=0)
    max_mutants_tried: int = Field(default=60, ge=0)


class Rejected(BaseModel):
    """A candidate that was not emitted, and why."""

    project: str
    kind: str
    candidate: str
    reason: str


class ProjectDerivation(BaseModel):
    project: str
    tasks: list[DerivedTask] = Field(default_factory=list)
    rejected: list[Rejected] = Field(default_factory=list)
    mutants_tried: int = 0
    test_runs: int = 0


def _files(project: Project) -> dict[str, str]:
    """The project's package (with what its build adds) and tests as {relative path: text}."""
    out = {rel: project.read(rel) for rel in project.source_files()}
    out.update({rel: text for rel, text in project.build_files.items() if rel not in out})
    for t in project.tasks:
        out[t.test_file] = project.read(t.test_file)
    for path in sorted((project.root / "tests").glob("*.py")):  # conftest.py, __init__.py, helpers
        if not path.name.startswith("test_"):
            out[f"tests/{path.name}"] = path.read_text(encoding="utf-8")
    for rel in project.data_files()[0]:  # package data, test fixtures
        out[rel] = project.read(rel)
    return out


def _support(files: dict[str, str]) -> dict[str, str]:
    """Test files that are no task's tests (conftest.py, tests/__init__.py, helpers)."""
    return {k: v for k, v in files.items() if k.startswith("tests/")
            and not ("/" not in k[6:] and k[6:].startswith("test_") and k.endswith(".py"))}


def _package(files: dict[str, str], project: Project) -> dict[str, str]:
    return {k: v for k, v in files.items() if k.startswith(project.package_dir + "/") or k in project.build_files}


def _grade_paths(project: Project) -> dict:
    """grade.json's package folder (`src/pkg` in a src layout) and the build's files beside it."""
    extra = sorted(k for k in project.build_files if not k.startswith(project.package_dir + "/"))
    return {"package": project.package_dir, **({"also": extra} if extra else {})}


def _tests(files: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in files.items() if k.startswith("tests/")}


def _stubbed(project: Project, funcs: list[str], files: dict[str, str],
             result: "ProjectDerivation | None" = None, kind: str = "implement") -> dict[str, str]:
    """The package with the given "file:qualname" functions stubbed; a function that cannot be
    stubbed safely (see `stubbable`) is left as it is and logged in `result.rejected`."""
    used = _import_time_names(project, files)
    by_file: dict[str, list[str]] = {}
    for f in funcs:
        file, name = f.split(":", 1)
        if file not in files:
            raise AheError(f"{project.root / 'playground.toml'}: {file} is not a file of the package; "
                           "fix the task's `functions` list.")
        why = stubbable(files[file], name, used)
        if why and why.startswith("not defined"):
            raise AheError(f"{project.root / 'playground.toml'}: {file} defines no function {name}; "
                           "fix the task's `functions` list.")
        if why:
            if result is not None:
                result.rejected.append(Rejected(project=project.name, kind=f"{kind}-stub", candidate=f, reason=why))
            continue
        by_file.setdefault(file, []).append(name)
    out = dict(_package(files, project))
    for file, names in by_file.items():
        out[file] = stub_source(out[file], names)
    return out


def _import_time_names(project: Project, files: dict[str, str]) -> set[str]:
    names: set[str] = set()
    for rel, text in _package(files, project).items():
        if rel.endswith(".py"):
            names |= import_time_names(text)
    return names


async def derive_project(project: Project, runner: SandboxRunner, limits: DeriveLimits,
                         log: Callable[[str], None] = lambda s: None) -> ProjectDerivation:
    files = _files(project)
    tests = _tests(files)
    result = ProjectDerivation(project=project.name)
    for rel in project.data_files()[1]:
        result.rejected.append(Rejected(project=project.name, kind="file", candidate=rel,
                                        reason="a binary file cannot travel in a task; tests that need it will fail"))
    ref = await runner.run(files)
    if not ref.all_pass:
        failing = ref.failing()
        if failing:
            more = f" and {len(failing) - 3} more" if len(failing) > 3 else ""
            what = f"{len(failing)} of {len(ref.tests)} tests fail: {', '.join(failing[:3])}{more}"
        else:
            what = ref.crashed or ("the tests timed out" if ref.timed_out else "no test ran")
        raise AheError(f"{project.root}: the reference does not pass its own tests ({what}); "
                       "fix the project (or its test environment) before deriving tasks from it.")
    ids = ref.passing()  # skipped and expected-to-fail tests count neither way
    skipped = len(ref.tests) - len(ids)
    log(f"{project.name}: reference passes {len(ids)} tests ({runner.describe()})"
        + (f"; {skipped} skipped or xfailed, left out of every task" if skipped else ""))
    implement = [_implement(project, i, files, ids, runner, result) for i in range(len(project.tasks))]
    library = [_library(project, m, files, ids, runner, result) for m in project.modules()]
    for derived in await asyncio.gather(*implement, *library):
        if derived is not None:
            result.tasks.append(derived)
    await _bugs(project, files, tests, ids, runner, limits, result, log)
    result.test_runs = runner.runs
    return result


async def _implement(project: Project, index: int, files: dict[str, str], ids: list[str],
                     runner: SandboxRunner, result: ProjectDerivation) -> DerivedTask | None:
    task = project.tasks[index]
    funcs = [f for t in project.tasks[index:] for f in t.functions]
    start = _stubbed(project, funcs, files, result if index == 0 else None)
    graded = [i for t in project.tasks[: index + 1] for i in kinds.tests_of(t, ids)]
    run = await runner.run({**start, **_tests(files)})
    own = kinds.tests_of(task, ids)
    broken = await _import_broken(runner, start)
    if broken:
        result.rejected.append(Rejected(project=project.name, kind="implement", candidate=task.name, reason=broken))
        return None
    failing_own = [i for i in own if run.tests.get(i) != "pass"]  # a module that no longer loads fails too
    if not failing_own:
        result.rejected.append(Rejected(project=project.name, kind="implement", candidate=task.name,
                                        reason="no test of the task fails on the stubbed code"))
        return None
    changed = {k: v for k, v in files.items() if k in start and start[k] != v}
    return DerivedTask(
        name=f"{project.name}-implement-{task.name}", kind="implement", project=project.name,
        title=task.title, instruction=kinds.implement_instruction(project, index),
        environment=start, suite=_suite(files, project.tasks[: index + 1]),
        grade={**_grade_paths(project), "groups": {"this_task": own, "earlier_tasks": graded[: len(graded) - len(own)]}},
        solution=changed, difficulty="medium" if len(task.functions) <= 3 else "hard",
        details={"tests": len(graded), "failing_on_start": len(failing_own), "of_own": len(own)})


def _suite(files: dict[str, str], tasks: list) -> dict[str, str]:
    extra = {k.removeprefix("tests/"): v for k, v in _support(files).items()}
    return {**extra, **{t.test_file.removeprefix("tests/"): files[t.test_file] for t in tasks}}


async def _library(project: Project, module: str, files: dict[str, str], ids: list[str],
                   runner: SandboxRunner, result: ProjectDerivation) -> DerivedTask | None:
    used = _import_time_names(project, files)
    names = [n for n in function_names(files[module]) if stubbable(files[module], n, used) is None]
    if not names:
        result.rejected.append(Rejected(project=project.name, kind="library", candidate=module,
                                        reason="no function of the module can be stubbed"))
        return None
    start = _stubbed(project, [f"{module}:{n}" for n in function_names(files[module])], files, result, "library")
    run = await runner.run({**start, **_tests(files)})
    broken = await _import_broken(runner, start)
    if broken:
        result.rejected.append(Rejected(project=project.name, kind="library", candidate=module, reason=broken))
        return None
    if not _broken(run, ids):
        result.rejected.append(Rejected(project=project.name, kind="library", candidate=module,
                                        reason="no test fails with the module stubbed"))
        return None
    slug = module.removeprefix(project.package_dir + "/").removesuffix(".py").replace("/", "-").replace("_", "-")
    return DerivedTask(
        name=f"{project.name}-library-{slug}", kind="library", project=project.name,
        title=f"implement {module}", instruction=kinds.library_instruction(project, module, [f"{module}:{n}" for n in names]),
        environment=start, suite=_suite(files, project.tasks),
        grade={**_grade_paths(project), "groups": {"fraction": ids}},
        solution={module: files[module]}, difficulty="hard" if len(names) > 4 else "medium",
        details={"functions": len(names), "failing_on_start": len(_broken(run, ids)), "tests": len(ids)})


async def _bugs(project: Project, files: dict[str, str], tests: dict[str, str], ids: list[str],
                runner: SandboxRunner, limits: DeriveLimits, result: ProjectDerivation,
                log: Callable[[str], None]) -> None:
    """Try mutants until enough are caught; caught ones become fix, then reproduce tasks."""
    wanted = limits.max_fix + limits.max_reproduce
    candidates: list[Mutant] = []
    for module in project.modules():
        funcs = [f.split(":", 1)[1] for t in project.tasks for f in t.functions if f.startswith(module + ":")]
        candidates += mutants_of(module, files[module], funcs)
    order = interleave(candidates)[: limits.max_mutants_tried]
    caught: list[tuple[Mutant, RunResult]] = []
    batch = 4
    for start in range(0, len(order), batch):
        if len(caught) >= wanted:
            break
        chunk = order[start : start + batch]
        runs = await asyncio.gather(*(runner.run({**files, m.file: m.source}) for m in chunk))
        for m, run in zip(chunk, runs):
            result.mutants_tried += 1
            reason = _mutant_verdict(run, ids)
            if reason:
                result.rejected.append(Rejected(project=project.name, kind="fix", candidate=f"{m.operator} {m.change} at {m.where}",
                                                reason=reason))
            elif len(caught) < wanted:
                caught.append((m, run))
    log(f"{project.name}: {result.mutants_tried} mutants tried, {len(caught)} caught by the tests")
    docs = kinds.test_docstrings(tests)
    for n, (m, run) in enumerate(caught[: limits.max_fix], start=1):
        result.tasks.append(_fix(project, n, m, run, files, ids, docs))
    for n, (m, run) in enumerate(caught[limits.max_fix :], start=1):
        derived = await _reproduce(project, n, m, run, files, ids, runner, docs, result)
        if derived is not None:
            result.tasks.append(derived)


async def _import_broken(runner: SandboxRunner, package: dict[str, str]) -> str | None:
    """Why the stubbed package does not even import, else None. (Test modules that call a
    stubbed function while they load are fine: they fail until the agent implements it.)"""
    error = await runner.import_error(package)
    return f"the stubbed package does not import ({error})" if error else None


def _broken(run: RunResult, ids: list[str]) -> list[str]:
    """The reference's tests that do not pass on a variant (an import error breaks them all)."""
    return [i for i in ids if run.tests.get(i) != "pass"]


def _mutant_verdict(run: RunResult, ids: list[str]) -> str | None:
    """Why a mutant cannot be a task (None when some test catches it)."""
    if run.timed_out:
        return "the tests hang on it (timed out)"
    if run.crashed:
        return f"the test run crashed: {run.crashed[:200]}"
    if not _broken(run, ids):
        return "no test catches it (it survives every test)"
    return None


def _report(run: RunResult, broken: list[str], docs: dict[str, str]) -> str:
    """The issue text from the first caught test that has an error message."""
    first = next((i for i in broken if i in run.messages), broken[0])
    message = run.messages.get(first) or next(iter(run.messages.values()), "")
    return kinds.symptom(first, message, docs)


def _fix(project: Project, n: int, m: Mutant, run: RunResult, files: dict[str, str], ids: list[str],
         docs: dict[str, str]) -> DerivedTask:
    f2p = _broken(run, ids)
    p2p = [i for i in ids if i not in f2p]
    return DerivedTask(
        name=f"{project.name}-fix-{n:02d}", kind="fix", project=project.name, title=f"fix bug {n}",
        instruction=kinds.fix_instruction(project, _report(run, f2p, docs), len(f2p)),
        environment={**_package(files, project), m.file: m.source}, suite=_suite(files, project.tasks),
        grade={**_grade_paths(project), "groups": {"fail_to_pass": f2p, "pass_to_pass": p2p}},
        solution={m.file: files[m.file]},
        details={"operator": m.operator, "change": m.change, "where": m.where, "fail_to_pass": len(f2p),
                 "pass_to_pass": len(p2p)})


async def _reproduce(project: Project, n: int, m: Mutant, run: RunResult, files: dict[str, str], ids: list[str],
                     runner: SandboxRunner, docs: dict[str, str], result: ProjectDerivation) -> DerivedTask | None:
    failing = _broken(run, ids)
    methods_by_file: dict[str, set[str]] = {}
    for test_id in failing:
        rel, name = kinds.split_test_id(test_id, files)
        methods_by_file.setdefault(rel, set()).add(name)
    visible = dict(_tests(files))
    for rel, methods in methods_by_file.items():
        if rel in visible:
            visible[rel] = kinds.remove_tests(visible[rel], methods)
    buggy = {**_package(files, project), m.file: m.source}
    on_buggy, on_ref = await asyncio.gather(runner.run({**buggy, **visible}),
                                            runner.run({**_package(files, project), **visible}))
    if not (on_buggy.all_pass and on_ref.all_pass):
        result.rejected.append(Rejected(project=project.name, kind="reproduce", candidate=f"{m.operator} at {m.where}",
                                        reason="the remaining tests do not pass on both the buggy and the reference code"))
        return None
    restored = {rel: files[rel] for rel in methods_by_file}
    return DerivedTask(
        name=f"{project.name}-reproduce-{n:02d}", kind="reproduce", project=project.name, title=f"reproduce bug {n}",
        instruction=kinds.reproduce_instruction(project, _report(run, failing, docs)),
        environment={"tests/__init__.py": "", **buggy, **visible},
        archives={"buggy.tar.gz": buggy, "reference.tar.gz": _package(files, project)},
        grade=_grade_paths(project), solution=restored, difficulty="easy",
        details={"operator": m.operator, "change": m.change, "where": m.where, "removed_tests": failing})
