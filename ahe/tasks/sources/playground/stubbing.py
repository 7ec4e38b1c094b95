"""AST stubbing: replace function bodies by `raise NotImplementedError`, keeping signatures,
decorators and docstrings, and leaving every other line of the file as it was.

Used for the scaffold check, `implement` tasks (this task's and later tasks' functions) and
`library` tasks (every function of a module). Real code has decorated nested functions,
properties, class- and static methods, overloads, async functions and generators: the body
is cut from the first line of its first statement *including that statement's decorators*,
so nothing dangles. What cannot be stubbed safely is left as it is, with a reason
(`stubbable`): `@overload` and abstract declarations (no body to take away), functions whose
body shares a line with their header, and functions the package runs while it is imported
(a decorator applied at module level, a call in a class body or a default value), whose stub
would break the import itself.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(tree: ast.Module) -> Iterator[tuple[str, FunctionNode]]:
    """Top-level functions and methods of top-level classes, with their qualified names.

    A name defined twice (typing overloads, a property's getter and setter) yields each
    definition; `stub_source` stubs every one that has a real body.
    """
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item


def function_names(source: str) -> list[str]:
    """Every qualified name once, in file order."""
    return list(dict.fromkeys(name for name, _ in _functions(ast.parse(source))))


def _has_docstring(fn: ast.AST) -> bool:
    body = fn.body  # type: ignore[attr-defined]
    return bool(body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str)


def _decorator_names(fn: FunctionNode) -> set[str]:
    out = set()
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        out.add(target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
    return out


def _start(stmt: ast.stmt) -> int:
    """First line of a statement, its decorators included."""
    decorators = getattr(stmt, "decorator_list", [])
    return min([stmt.lineno] + [d.lineno for d in decorators])


def import_time_names(source: str) -> set[str]:
    """Names a module *calls* while it is being imported: decorators, calls in module-level
    statements, class bodies, default values and base classes — not in function bodies."""
    names: set[str] = set()

    def called(expr: ast.AST) -> None:
        target = expr.func if isinstance(expr, ast.Call) else expr
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif isinstance(target, ast.Attribute):
            names.add(target.attr)

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                called(d)
                visit(d)
            for part in [*node.args.defaults, *node.args.kw_defaults]:
                if part is not None:
                    visit(part)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.ClassDef):
            for d in node.decorator_list:
                called(d)
        if isinstance(node, ast.Call):
            called(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    try:
        visit(ast.parse(source))
    except SyntaxError:
        pass
    return names


def stubbable(source: str, name: str, used_on_import: set[str] = frozenset()) -> str | None:
    """Why function `name` of `source` cannot be stubbed (None: it can)."""
    nodes = [fn for qn, fn in _functions(ast.parse(source)) if qn == name]
    if not nodes:
        return "not defined at the top level or in a top-level class"
    if name.rsplit(".", 1)[-1] in used_on_import:
        return "the package calls it while being imported (a decorator or a module-level call)"
    lines = source.splitlines(keepends=True)
    reasons = [_body_reason(fn, lines) for fn in nodes]
    return None if any(r is None for r in reasons) else reasons[-1]


def _body_reason(fn: FunctionNode, lines: list[str]) -> str | None:
    if _decorator_names(fn) & {"overload", "abstractmethod"}:
        return "a typing overload or an abstract declaration has no body to take away"
    body = fn.body[1:] if _has_docstring(fn) else fn.body
    if fn.body[0].lineno == fn.lineno or not body:
        return None  # `def f(): return 1`, or a docstring only: handled by the edit
    line = lines[_start(body[0]) - 1].encode("utf-8")
    if line[: body[0].col_offset].strip():
        return "its body shares a line with its header or docstring"
    return None


def stub_source(source: str, targets: Iterable[str] | None = None) -> str:
    """`source` with the named functions ("f", "Class.m"; all that can be, when None) stubbed.

    Raises KeyError naming a target that the file does not define. Definitions without a body
    to take away (overloads, abstract methods) are left as they are.
    """
    tree = ast.parse(source)
    defs: dict[str, list[FunctionNode]] = {}
    for name, fn in _functions(tree):
        defs.setdefault(name, []).append(fn)
    wanted = list(defs) if targets is None else list(dict.fromkeys(targets))
    missing = [t for t in wanted if t not in defs]
    if missing:
        raise KeyError(missing[0])
    lines = source.splitlines(keepends=True)
    edits = []
    for name in wanted:
        for fn in defs[name]:
            if _body_reason(fn, lines) is None:
                edits.append(_edit(fn, name))
    for start, end, col, text, inline in sorted(edits, reverse=True):
        if inline:
            line = lines[start - 1]
            lines[start - 1 : end] = [line[:col] + text + "\n"]
        else:
            lines[start - 1 : end] = [text + "\n"]
    out = "".join(lines)
    ast.parse(out)  # a stubbed file always parses
    return out


def _edit(fn: FunctionNode, name: str) -> tuple[int, int, int, str, bool]:
    body = fn.body[1:] if _has_docstring(fn) else fn.body
    raise_line = f'raise NotImplementedError("{name}")'
    if fn.body[0].lineno == fn.lineno:  # `def f(): return 1` on one line
        return (fn.lineno, fn.end_lineno, fn.body[0].col_offset, raise_line, True)
    indent = " " * fn.body[0].col_offset
    if body:  # from the first statement's first decorator to the end of the function
        return (_start(body[0]), fn.end_lineno, 0, indent + raise_line, False)
    return (fn.end_lineno + 1, fn.end_lineno, 0, indent + raise_line, False)  # only a docstring


def stubbed_names(source: str) -> set[str]:
    """Functions whose body is only (a docstring and) `raise NotImplementedError(...)`."""
    out = set()
    for name, fn in _functions(ast.parse(source)):
        body = fn.body[1:] if _has_docstring(fn) else fn.body
        if len(body) == 1 and isinstance(body[0], ast.Raise) and body[0].exc is not None:
            exc = body[0].exc
            target = exc.func if isinstance(exc, ast.Call) else exc
            if isinstance(target, ast.Name) and target.id == "NotImplementedError":
                out.add(name)
    return out
