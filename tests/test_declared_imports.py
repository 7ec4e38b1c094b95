"""Every third-party module AHE imports is a declared dependency of pyproject.toml.

A fresh venv with the README's install line gets exactly `[project.dependencies]`; a module
that only arrived with something else on the developer's machine (numpy with the `ray` extra)
makes `ahe demo` fail there. This reads every import — top level and inside functions;
`if TYPE_CHECKING:` blocks aside, they never run — of the shipped packages and of the agent
workspaces AHE loads, maps each third-party top-level module to the distribution that provides
it, and fails on one that is not declared, unless it is listed below with its reason.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ahe", "debugger", "evolve_agent", "explore_agent")
# Workspaces the runtime loads (their tools/ and middleware/ run at rollout time); the bundled
# tasks' own code runs inside the task's sandbox with the task's interpreter, not AHE's.
WORKSPACES = ("harness_workspace",)

# Imported on purpose without being a dependency, each behind a guard; the reason says which.
OPTIONAL = {
    "ray": "the `ray` extra: imported lazily, a missing one is one sentence naming `pip install 'ahe[ray]'`",
    "orjson": "an optional speed-up of trajectory reading, with a fallback to json (debugger/trial.py)",
    "httpx2": "the openai SDK's own transport (TLS context shared with it), tried before httpx; comes with openai",
    "httpx": "the transport of older openai SDKs, the fallback when httpx2 is absent; comes with openai",
}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_distributions() -> set[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_normalise(re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0]) for dep in meta["dependencies"]}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of every node under an `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`) block."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def imported_modules(path: Path) -> set[str]:
    """Top-level names of the absolute imports in one file that run (TYPE_CHECKING aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


def third_party_imports() -> dict[str, str]:
    """{top-level module: the first file importing it} over the shipped code and workspaces."""
    own = set(PACKAGES) | {"tools", "middleware"}  # a workspace's own folders, imported by the runtime
    found: dict[str, str] = {}
    for folder in PACKAGES + WORKSPACES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for top in imported_modules(path):
                local = (path.parent / f"{top}.py").exists() or (path.parent / top / "__init__.py").exists()
                if top in sys.stdlib_module_names or top in own or local or top == "__future__":
                    continue
                found.setdefault(top, str(path.relative_to(ROOT)))
    return found


def undeclared(declared: set[str]) -> list[str]:
    providers = importlib.metadata.packages_distributions()
    problems = []
    for top, where in sorted(third_party_imports().items()):
        if top in OPTIONAL:
            continue
        dists = {_normalise(d) for d in providers.get(top, [])}
        if not dists:
            problems.append(f"{top} (imported in {where}) is provided by no installed distribution and is not declared")
        elif not dists & declared:
            problems.append(f"{top} (imported in {where}) comes from {', '.join(sorted(dists))}, "
                            "which [project.dependencies] does not declare")
    return problems


def test_every_import_is_a_declared_dependency():
    problems = undeclared(declared_distributions())
    assert not problems, "undeclared imports — a fresh venv fails on them:\n" + "\n".join(problems)


def test_the_check_names_a_module_whose_dependency_is_removed():
    """The check can fail: without numpy declared it names numpy and where it is imported."""
    problems = undeclared(declared_distributions() - {"numpy"})
    assert any(p.startswith("numpy (imported in ahe/") for p in problems), problems


def test_optional_imports_are_lazy_or_guarded():
    """Importing any AHE module works without the optional modules: each is imported inside a
    function (lazily, where it is needed) or under a try/except ImportError, never bare at the
    top of a module."""
    bare = []
    for folder in PACKAGES:
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try)
                       and any(_catches_import_error(h) for h in t.handlers) for s in t.body for n in ast.walk(s)}
            for node in _outside_functions(tree):  # a function's import runs only when it is called
                if _imports_one_of(node, OPTIONAL) and id(node) not in guarded:
                    bare.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bare, f"optional modules imported at module level without a guard: {bare}"


def _outside_functions(node: ast.AST):
    """Every node that runs when the module is imported: all but function bodies."""
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield child
            yield from _outside_functions(child)


def _imports_one_of(node: ast.AST, tops) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] in tops for a in node.names)
    return isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in tops


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = {n.id for n in ast.walk(handler.type) if isinstance(n, ast.Name)} if handler.type else {"*"}
    return bool(names & {"ImportError", "ModuleNotFoundError", "Exception", "*"})
