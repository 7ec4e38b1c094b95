"""The model stages of `ahe tasks generate`, one function per stage and unit of work.

propose → plan (per project) → scaffold (per project) → tests (per task) → reference (per
task, in plan order). Each checks what the model made before it is kept (the mutual
verification of tests and references) and records every rejection with its reason.
"""

from __future__ import annotations

import ast

from ahe.errors import AheError
from ahe.tasks.sources.playground.generate.context import GenContext, UnitUsage, render
from ahe.tasks.sources.playground.generate.parse import (
    Plan, PlannedTask, ProjectProposal, Rejection, parse_plan, parse_proposals,
)
from ahe.tasks.sources.playground.kinds import remove_tests
from ahe.tasks.sources.playground.stubbing import stubbed_names


def _usage(result) -> dict:
    return UnitUsage.of(result.usage, result.turns).model_dump()


async def propose(ctx: GenContext, n: int) -> list[ProjectProposal]:
    path = ctx.path("generate", "propose.json")
    done = ctx.load(path)
    if done is None:
        result, _ = await ctx.session("propose", "projects", render("propose.md.j2", n=n, avoid=[]), files=None)
        found, rejected = parse_proposals(result.final_answer or "")
        kept, seen = [], set()
        for p in found:
            if p.name in seen or p.package in seen:
                rejected.append(Rejection(what=p.name, reason="duplicate name or package"))
                continue
            seen |= {p.name, p.package}
            kept.append(p)
        for r in rejected:
            ctx.reject("propose", "projects", r.what, r.reason)
        if not kept:
            raise AheError("the generator proposed no valid project (see generate/events.jsonl under --out); "
                           "check the model's answer in traces/propose/projects/trajectory.json.")
        done = {"status": "done", "proposals": [p.model_dump() for p in kept[:n]],
                "rejected": [r.model_dump() for r in rejected], "usage": _usage(result)}
        ctx.finish_unit("propose", "projects", path, done)
    return [ProjectProposal.model_validate(p) for p in done["proposals"]]


async def plan(ctx: GenContext, project: ProjectProposal) -> Plan:
    path = ctx.path("projects", project.name, "plan.json")
    done = ctx.load(path)
    if done is None:
        result, _ = await ctx.session("plan", project.name, render("plan.md.j2", project=project), files=None)
        parsed = parse_plan(result.final_answer or "", project.package)
        for r in parsed.rejected:
            ctx.reject("plan", project.name, r.what, r.reason)
        done = {"status": "done" if parsed.tasks else "dropped", **parsed.model_dump(), "usage": _usage(result)}
        ctx.finish_unit("plan", project.name, path, done)
    return Plan.model_validate({k: done[k] for k in ("tasks", "rejected")})


async def scaffold(ctx: GenContext, project: ProjectProposal, planned: Plan) -> dict:
    """The package with every planned function as a stub; tasks whose stubs are missing drop."""
    path = ctx.path("projects", project.name, "scaffold.json")
    done = ctx.load(path)
    if done is not None:
        return done
    modules: dict[str, list[PlannedTask]] = {}
    for t in planned.tasks:
        modules.setdefault(t.module, []).append(t)
    result, files = await ctx.session("scaffold", project.name, render("scaffold.md.j2", project=project, modules=modules),
                                      files={})
    package = {k: v for k, v in files.items() if k.startswith(project.package + "/")}
    package.setdefault(f"{project.package}/__init__.py", "")
    rejected, dropped = [], []
    imports = "\n".join(f"import {m[:-3].replace('/', '.')}" for m in sorted(package))
    check = await ctx.runner.run({**package, "tests/test_imports.py": imports + "\n"})
    if check.failing() or check.timed_out or check.crashed:
        dropped = [t.name for t in planned.tasks]
        rejected.append(ctx.reject("scaffold", project.name, "package", "the scaffold does not import"))
    for t in planned.tasks:
        if t.name in dropped:
            continue
        stubs = _stubs(package.get(t.module))
        missing = [f for f in t.functions if f not in stubs]
        if missing:
            dropped.append(t.name)
            rejected.append(ctx.reject("scaffold", project.name, f"task {t.name}",
                                       f"no stub raising NotImplementedError for {', '.join(missing)}"))
    done = {"status": "done", "package": package, "dropped_tasks": dropped, "rejected": rejected, "usage": _usage(result)}
    ctx.finish_unit("scaffold", project.name, path, done)
    return done


def _stubs(source: str | None) -> set[str]:
    if source is None:
        return set()
    try:
        return stubbed_names(source)
    except SyntaxError:
        return set()


def test_file(task: PlannedTask) -> str:
    return f"tests/test_{task.name.replace('-', '_')}.py"


def _methods_mentioning(source: str, word: str) -> set[str]:
    out = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and word in (ast.get_source_segment(source, item) or ""):
                    out.add(f"{node.name}.{item.name}")
    return out


async def tests(ctx: GenContext, project: ProjectProposal, task: PlannedTask, package: dict[str, str]) -> dict:
    """The task's unit tests; every kept test fails on the scaffold and never expects a stub."""
    path = ctx.path("projects", project.name, "tests", f"{task.name}.json")
    done = ctx.load(path)
    if done is not None:
        return done
    rel = test_file(task)
    result, files = await ctx.session("tests", f"{project.name}-{task.name}", render(
        "tests.md.j2", project=project, task=task, test_file=rel), files=package)
    rejected: list[dict] = []
    source = files.get(rel)
    status, reason = "done", None
    try:
        if source is None:
            raise SyntaxError(f"no {rel} was written")
        ast.parse(source)
    except SyntaxError as exc:
        status, reason = "dropped", f"the test file is missing or does not parse ({exc})"
    if status == "done":
        expecting = _methods_mentioning(source, "NotImplementedError")
        for m in sorted(expecting):
            rejected.append(ctx.reject("tests", task.name, m, "expects NotImplementedError instead of real behaviour"))
        if expecting:
            source = remove_tests(source, expecting)
        run = await ctx.runner.run({**package, rel: source})
        passing = [i.split(".", 2)[-1] for i in run.passing()]
        for m in passing:
            rejected.append(ctx.reject("tests", task.name, m, "passes on the scaffold, so it checks nothing the task adds"))
        if passing:
            source = remove_tests(source, set(passing))
        if not run.tests or len(run.tests) == len(passing):
            status, reason = "dropped", "no test is left that fails on the scaffold"
    if reason:
        rejected.append(ctx.reject("tests", task.name, "task", reason))
    done = {"status": status, "file": rel, "source": source if status == "done" else None,
            "rejected": rejected, "usage": _usage(result)}
    ctx.finish_unit("tests", f"{project.name}-{task.name}", path, done)
    return done


async def reference(ctx: GenContext, project: ProjectProposal, task: PlannedTask, package: dict[str, str],
                    kept_tests: dict[str, str], done_tasks: list[str]) -> dict:
    """Implement the task with its tests hidden, then grade it with the original tests restored.

    A test that fails on an otherwise passing reference is rejected (removed); a task whose
    tests mostly fail, or that breaks an earlier task's tests, is dropped and its code reverted.
    """
    path = ctx.path("projects", project.name, "reference", f"{task.name}.json")
    done = ctx.load(path)
    if done is not None:
        return done
    rel = test_file(task)
    result, files = await ctx.session("reference", f"{project.name}-{task.name}", render(
        "reference.md.j2", project=project, task=task, done=done_tasks), files=package)
    new_package = {k: v for k, v in files.items() if k.startswith(project.package + "/")}
    run = await ctx.runner.run({**new_package, **kept_tests})
    own_prefix = f"tests.{rel[6:-3]}."
    mine = lambda i: i.startswith(own_prefix) or i.endswith(own_prefix[:-1])  # noqa: E731 - an import error counts
    own = [i for i in run.tests if mine(i)]
    own_failing = [i for i in own if i in run.failing()]
    earlier_failing = [i for i in run.failing() if not mine(i)]
    rejected: list[dict] = []
    source, status = kept_tests[rel], "done"
    if earlier_failing or run.timed_out or run.crashed:
        status = "dropped"
        rejected.append(ctx.reject("reference", task.name, "task", "the reference breaks earlier tasks' tests "
                                   f"({', '.join(earlier_failing[:3]) or 'the run did not finish'})"))
    elif own_failing and (len(own_failing) * 2 > len(own) or len(own_failing) == len(own)):
        status = "dropped"
        rejected.append(ctx.reject("reference", task.name, "task",
                                   f"the reference cannot pass its tests ({len(own_failing)} of {len(own)} fail)"))
    elif own_failing:
        methods = {i.split(".", 2)[-1] for i in own_failing}
        for m in sorted(methods):
            rejected.append(ctx.reject("reference", task.name, m, "fails on a reference that passes the task's other tests"))
        source = remove_tests(source, methods)
    done = {"status": status, "package": new_package if status == "done" else package,
            "tests_source": source if status == "done" else None, "rejected": rejected, "usage": _usage(result)}
    ctx.finish_unit("reference", f"{project.name}-{task.name}", path, done)
    return done
