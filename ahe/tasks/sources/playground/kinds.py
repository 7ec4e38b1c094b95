"""The four derived task kinds: what the agent is told and what it starts from.

- implement: earlier tasks done, this task's (and later tasks') functions stubbed;
- library:   every function of one module stubbed (signatures and docstrings kept);
- fix:       one mutation caught by at least one test; the instruction is an issue text that
             describes the symptom, never the file, function or line;
- reproduce: the same kind of bug with the tests that catch it removed; the agent writes a
             test that fails on the buggy code and passes on the reference.
"""

from __future__ import annotations

import ast
import re

from ahe.tasks.sources.playground.project import Project, TaskSpec

_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")
FOOTER = ("Use the Python standard library only. Hidden unit tests (unittest) are run on the package "
          "in /app/{package} when you finish.")
# a project with its own test environment (pytest, dependencies: a real library)
FOOTER_ENV = ("Hidden unit tests are run on the package in /app/{package} when you finish, with the "
              "project's test environment (its Python and packages are in /opt/ahe-env).")


def footer(project: Project) -> str:
    info = project.project
    plain = info.runner != "pytest" and not info.requirements and not info.setup and not _declares(project)
    return (FOOTER if plain else FOOTER_ENV).format(package=project.package_dir)


def _declares(project: Project) -> bool:
    root = project.root
    return any((root / f).is_file() for f in ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "pytest.ini"))


def _header(project: Project) -> str:
    return f"You are working on `{project.name}` in /app: {project.project.description}"


def _stub_list(funcs: list[str]) -> str:
    by_file: dict[str, list[str]] = {}
    for f in funcs:
        file, name = f.split(":", 1)
        by_file.setdefault(file, []).append(f"`{name}`")
    return "\n".join(f"- `{file}`: {', '.join(names)}" for file, names in by_file.items())


def implement_instruction(project: Project, index: int) -> str:
    task = project.tasks[index]
    done = [f"- {t.title}" for t in project.tasks[:index]] or ["- nothing yet: this is the first task"]
    later = [f for t in project.tasks[index + 1 :] for f in t.functions]
    text = [f"# {project.name}: {task.title}", "", _header(project), "", "Done so far:", *done, "",
            "## This task", "", task.description.strip(), "",
            "These functions are in place as stubs that raise `NotImplementedError`; implement them:",
            _stub_list(task.functions)]
    if later:
        text += ["", "Other stubs belong to later tasks; leave them as they are."]
    text += ["", footer(project) + " They check this task and every earlier one."]
    return "\n".join(text)


def library_instruction(project: Project, module: str, functions: list[str]) -> str:
    specs = [t for t in project.tasks if any(f.startswith(module + ":") for f in t.functions)]
    text = [f"# {project.name}: implement `{module}`", "", _header(project), "",
            f"Every function in `/app/{module}` has lost its body and raises `NotImplementedError`; "
            "the signatures and docstrings are still there. Implement the module again so that the "
            "whole package works:", _stub_list(functions), "", "## What the module does", ""]
    for t in specs:
        text += [f"### {t.title}", "", t.description.strip(), ""]
    text += [footer(project) + " They cover the whole package."]
    return "\n".join(text)


def symptom(test_id: str, message: str, docstrings: dict[str, str]) -> str:
    """What a user would report: the expectation (test docstring or name) and the error seen.

    Traceback lines (files, line numbers, code) are left out: they would give the location.
    """
    base = test_id.split("[", 1)[0]  # pytest parameters are no part of the name
    method = base.rsplit(".", 1)[-1]
    cls = base.rsplit(".", 2)[-2] if base.count(".") >= 2 else ""
    if cls.startswith("test"):  # a module: a pytest test function has no class
        cls = ""
    expectation = docstrings.get(f"{cls}.{method}" if cls else method) or method.removeprefix("test_").replace("_", " ")
    lines = message.splitlines()
    start = max((i for i, ln in enumerate(lines) if _EXC_LINE.match(ln)), default=len(lines) - 1)
    seen = [ln for ln in lines[start:] if ln.strip() and not ln.lstrip().startswith('File "')]
    observed = "\n".join(seen[:8])[:600] or "the result is wrong"
    subject = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", cls.removesuffix("Test")).lower() or "the program"
    return f"{subject}: {expectation.strip().rstrip('.')}.\n\nWhat happens instead:\n\n```\n{observed}\n```"


def fix_instruction(project: Project, report: str, n_failing: int) -> str:
    more = f" ({n_failing} checks fail because of it.)" if n_failing > 1 else ""
    return "\n".join([
        f"# Bug report against {project.name}", "", _header(project), "",
        "A user reports that this no longer works as documented:", "", report, "",
        f"Find the cause and fix it in the package under /app/{project.package_dir}.{more} Keep every "
        "other behaviour as it is.", "", footer(project)
        + " They include the checks that fail now and the ones that pass now."])


def reproduce_instruction(project: Project, report: str) -> str:
    return "\n".join([
        f"# Reproduce a reported bug in {project.name}", "", _header(project), "",
        "A user reports that this no longer works as documented:", "", report, "",
        "Do not fix the code. Write a unit test (unittest) under /app/tests/ — a new file "
        "named test_*.py, or a new method in an existing one — that fails on the current code "
        "because of this bug and will pass once the bug is fixed.", "",
        "To grade it, every test under /app/tests is run twice: against the package as it is now "
        "(at least one test must fail) and against the fixed package (every test must pass). "
        "Your changes to the package itself are not used."])


def test_docstrings(test_files: dict[str, str]) -> dict[str, str]:
    """{"Class.test_method": first docstring line} of the given test sources."""
    out = {}
    for rel, text in test_files.items():
        if not rel.endswith(".py"):
            continue
        for node in ast.parse(text).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):  # a pytest test function
                doc = ast.get_docstring(node)
                if doc:
                    out[node.name] = doc.splitlines()[0]
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        doc = ast.get_docstring(item)
                        if doc:
                            out[f"{node.name}.{item.name}"] = doc.splitlines()[0]
    return out


def split_test_id(test_id: str, files: dict[str, str]) -> tuple[str, str]:
    """("tests/test_x.py", "Class.test_y" or "test_z") of a test id; pytest parameters dropped."""
    base = test_id.split("[", 1)[0]
    parts = base.split(".")
    for n in range(len(parts) - 1, 0, -1):
        rel = "/".join(parts[:n]) + ".py"
        if rel in files:
            return rel, ".".join(parts[n:])
    module, cls, method = base.rsplit(".", 2)
    return module.replace(".", "/") + ".py", f"{cls}.{method}"


def remove_tests(source: str, methods: set[str]) -> str:
    """The test file without the named tests ("Class.test_x" methods, "test_y" functions); a
    class left with no test method keeps a `pass`."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    cuts = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in methods:
            cuts.append((min([node.lineno] + [d.lineno for d in node.decorator_list]), node.end_lineno, None))
        if not isinstance(node, ast.ClassDef):
            continue
        items = [i for i in node.body if isinstance(i, (ast.FunctionDef, ast.AsyncFunctionDef))]
        drop = [i for i in items if f"{node.name}.{i.name}" in methods]
        keep_any = len(drop) < len(node.body)
        for i in drop:
            first = min([i.lineno] + [d.lineno for d in i.decorator_list])
            cuts.append((first, i.end_lineno, None if keep_any else " " * i.col_offset + "pass\n"))
            keep_any = True  # only the first cut of an emptied class needs the `pass`
    for start, end, repl in sorted(cuts, reverse=True):
        lines[start - 1 : end] = [repl] if repl else []
    out = "".join(lines)
    ast.parse(out)
    return out


def tests_of(task: TaskSpec, ids: list[str]) -> list[str]:
    prefix = task.test_module + "."
    return sorted(i for i in ids if i.startswith(prefix))
