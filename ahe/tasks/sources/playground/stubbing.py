"""AST stubbing: replace function bodies by `raise NotImplementedError`, keeping signatures,
decorators and docstrings, and leaving every other line of the file as it was.

Used for the scaffold check, `implement` tasks (this task's and later tasks' functions) and
`library` tasks (every function of a module).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Top-level functions and methods of top-level classes, with their qualified names."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item


def function_names(source: str) -> list[str]:
    return [name for name, _ in _functions(ast.parse(source))]


def _has_docstring(fn: ast.AST) -> bool:
    body = fn.body  # type: ignore[attr-defined]
    return bool(body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str)


def stub_source(source: str, targets: Iterable[str] | None = None) -> str:
    """`source` with the named functions ("f", "Class.m"; all when None) stubbed.

    Raises KeyError naming a target that the file does not define.
    """
    tree = ast.parse(source)
    found = dict(_functions(tree))
    wanted = list(found) if targets is None else list(targets)
    missing = [t for t in wanted if t not in found]
    if missing:
        raise KeyError(missing[0])
    lines = source.splitlines(keepends=True)
    edits = []
    for name in wanted:
        fn = found[name]
        body = fn.body[1:] if _has_docstring(fn) else fn.body
        raise_line = f'raise NotImplementedError("{name}")'
        if fn.body[0].lineno == fn.lineno:  # `def f(): return 1` on one line
            edits.append((fn.lineno, fn.end_lineno, fn.body[0].col_offset, raise_line, True))
            continue
        indent = " " * fn.body[0].col_offset
        if body:
            edits.append((body[0].lineno, fn.end_lineno, 0, indent + raise_line, False))
        else:  # only a docstring: add the raise after it
            edits.append((fn.end_lineno + 1, fn.end_lineno, 0, indent + raise_line, False))
    for start, end, col, text, inline in sorted(edits, reverse=True):
        if inline:
            line = lines[start - 1]
            lines[start - 1 : end] = [line[:col] + text + "\n"]
        else:
            lines[start - 1 : end] = [text + "\n"]
    out = "".join(lines)
    ast.parse(out)  # a stubbed file always parses
    return out


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
