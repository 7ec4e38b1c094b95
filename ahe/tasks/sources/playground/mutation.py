"""Mutation operators: one small, plausible bug per mutant, in one function of one file.

Each operator finds candidate AST nodes inside the named functions and rewrites only that
node's source segment, so the rest of the file keeps its text. A mutant that does not compile
or that equals another is dropped here; whether any test catches it is decided by running
the tests (see `derive`), and a mutant no test catches is never emitted.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator

from pydantic import BaseModel

from ahe.tasks.sources.playground.stubbing import _functions

_FLIP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
         ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
           ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.FloorDiv: ast.Div, ast.Mult: ast.FloorDiv}
_EXITS = (ast.Raise, ast.Return, ast.Continue, ast.Break)

OPERATORS = ("flip-comparison", "off-by-one", "dropped-guard", "swapped-arguments",
             "boolean-operator", "arithmetic")


class Mutant(BaseModel):
    """One injected bug. `where` is for the logs only; task instructions never show it."""

    id: str
    operator: str
    file: str  # relative to the project root
    function: str
    line: int
    change: str  # e.g. "`<` -> `<=`"
    source: str  # the whole mutated file

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line} in {self.function}"


def _segment_replace(source: str, node: ast.AST, text: str) -> str:
    lines = source.splitlines(keepends=True)
    start = sum(len(x) for x in lines[: node.lineno - 1]) + _byte_col(lines[node.lineno - 1], node.col_offset)
    end = sum(len(x) for x in lines[: node.end_lineno - 1]) + _byte_col(lines[node.end_lineno - 1], node.end_col_offset)
    return source[:start] + text + source[end:]


def _byte_col(line: str, col: int) -> int:
    """AST columns are UTF-8 byte offsets; convert to a character offset."""
    return len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))


def _candidates(fn: ast.AST) -> Iterator[tuple[str, ast.AST, str, str]]:
    """(operator, node, replacement text, change) for every mutation point in a function."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIP:
            new = copy.deepcopy(node)
            new.ops = [_FLIP[type(node.ops[0])]()]
            yield ("flip-comparison", node, ast.unparse(new),
                   f"`{_SYMBOL[type(node.ops[0])]}` -> `{_SYMBOL[type(new.ops[0])]}`")
        elif isinstance(node, ast.Constant) and type(node.value) is int and 0 <= node.value <= 10:
            for delta in (1, -1):
                if node.value + delta >= 0:
                    yield ("off-by-one", node, repr(node.value + delta), f"`{node.value}` -> `{node.value + delta}`")
        elif isinstance(node, ast.If) and not node.orelse and isinstance(node.body[-1], _EXITS):
            yield ("dropped-guard", node, "pass", f"guard `if {ast.unparse(node.test)}` removed")
        elif isinstance(node, ast.Call) and len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
            a, b = (ast.unparse(x) for x in node.args[:2])
            if a != b:
                new = copy.deepcopy(node)
                new.args[0], new.args[1] = new.args[1], new.args[0]
                yield ("swapped-arguments", node, ast.unparse(new), f"arguments `{a}` and `{b}` swapped")
        elif isinstance(node, ast.BoolOp):
            new = copy.deepcopy(node)
            new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            yield ("boolean-operator", node, f"({ast.unparse(new)})",
                   "`and` -> `or`" if isinstance(node.op, ast.And) else "`or` -> `and`")
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH and not _collection(node):
            new = copy.deepcopy(node)
            new.op = _ARITH[type(node.op)]()
            yield ("arithmetic", node, f"({ast.unparse(new)})", f"`{ast.unparse(node)}` -> `{ast.unparse(new)}`")


def _collection(node: ast.BinOp) -> bool:
    """`+` on lists, strings or tuples: swapping it for `-` is a crash, not a plausible bug."""
    kinds = (ast.List, ast.ListComp, ast.Tuple, ast.JoinedStr, ast.Dict, ast.Set)
    return any(isinstance(x, kinds) or (isinstance(x, ast.Constant) and isinstance(x.value, str))
               for x in (node.left, node.right))


def mutants_of(file: str, source: str, functions: list[str]) -> list[Mutant]:
    """Every compiling, distinct mutant of the named functions of one file, in source order."""
    tree = ast.parse(source)
    wanted = set(functions)
    out: list[Mutant] = []
    seen = {source}
    for qualname, fn in _functions(tree):
        if qualname not in wanted:
            continue
        for operator, node, text, change in _candidates(fn):
            if operator == "dropped-guard":
                indent_src = source.splitlines()[node.lineno - 1]
                text = "pass"
                mutated = _replace_statement(source, node, indent_src)
            else:
                mutated = _segment_replace(source, node, text)
            if mutated in seen:
                continue
            try:
                compile(mutated, file, "exec")
            except SyntaxError:
                continue
            seen.add(mutated)
            out.append(Mutant(id=f"{file}:{node.lineno}:{node.col_offset}:{operator}:{len(out)}", operator=operator,
                              file=file, function=qualname, line=node.lineno, change=change, source=mutated))
    return out


def _replace_statement(source: str, node: ast.stmt, first_line: str) -> str:
    """Replace a whole statement (all its lines) by `pass` at its indentation."""
    lines = source.splitlines(keepends=True)
    indent = first_line[: len(first_line) - len(first_line.lstrip())]
    lines[node.lineno - 1 : node.end_lineno] = [indent + "pass\n"]
    return "".join(lines)


def interleave(mutants: list[Mutant]) -> list[Mutant]:
    """A deterministic order that spreads early picks over functions and operators."""
    buckets: dict[tuple[str, str], list[Mutant]] = {}
    for m in mutants:
        buckets.setdefault((m.function, m.operator), []).append(m)
    keys = sorted(buckets, key=lambda k: (OPERATORS.index(k[1]), k[0]))
    # round-robin over functions first, so one big function does not take every slot
    by_function: dict[str, list[tuple[str, str]]] = {}
    for k in keys:
        by_function.setdefault(k[0], []).append(k)
    order: list[Mutant] = []
    rounds = 0
    while any(buckets.values()):
        for fn in sorted(by_function):
            ks = by_function[fn]
            k = ks[rounds % len(ks)]
            if buckets[k]:
                order.append(buckets[k].pop(0))
            else:
                for k2 in ks:
                    if buckets[k2]:
                        order.append(buckets[k2].pop(0))
                        break
        rounds += 1
    return order
