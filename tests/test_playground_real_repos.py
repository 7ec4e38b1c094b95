"""`ahe tasks derive` + `ahe tasks check` on real libraries (tests/fixtures/real_repos), and the
stubber and grader on the Python real code is written in.

cachetools (pytest from tox.ini, decorated nested functions, a mixin in tests/__init__.py),
isodate (unittest, runtime dependency six, tests that call the package at import time) and
iniconfig (pytest, the test-only dependency py named in playground.toml): at least 95 % of the
derived tasks must pass `ahe tasks check` (oracle 1, do-nothing not passing).
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ahe.tasks.sources.playground.stubbing import function_names, import_time_names, stub_source, stubbable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_repos import playground_project  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def ahe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ahe.cli", *args], capture_output=True, text=True, timeout=900)


@needs_bwrap
@pytest.mark.parametrize("name, runner", [("cachetools", "pytest"), ("isodate", "unittest"), ("iniconfig", "pytest")])
def test_derived_tasks_of_a_real_library_pass_tasks_check(tmp_path, name, runner):
    project = playground_project(tmp_path, name)
    out = tmp_path / "tasks"
    proc = ahe("tasks", "derive", "--project", str(project), "--out", str(out), "--max-fix", "3", "--max-reproduce", "2")
    if "installing the test requirements" in proc.stderr and "failed" in proc.stderr:
        pytest.skip(f"pip cannot make the test environment here: {proc.stderr[-300:]}")
    assert proc.returncode == 0, proc.stderr
    assert f"tests run by {runner}" in " ".join(proc.stderr.split())
    log = json.loads((out / "derive.json").read_text())
    assert len(log["tasks"]) >= 5
    first = next(out.glob(f"{name}-*/tests/grade.json"))
    assert json.loads(first.read_text())["runner"] == runner
    check = ahe("tasks", "check", str(out), "--json")
    rows = json.loads(check.stdout)["tasks"]
    passed = [r for r in rows if r["ok"]]
    assert len(passed) / len(rows) >= 0.95, [r for r in rows if not r["ok"]]
    assert all(r["nop"]["reward"] < 1 for r in rows)


STUB_CASES = textwrap.dedent('''
    import functools
    from abc import abstractmethod
    from typing import overload


    def deco(func):
        """Used while the module is imported."""
        @functools.wraps(func)
        def wrapper(*a, **k):
            return func(*a, **k)
        return wrapper


    def memo(func):
        """A decorator with a decorated nested function, not used at import time."""
        @functools.wraps(func)
        def wrapper(*a):
            return func(*a)
        return wrapper


    @deco
    def decorated(x):
        return x + 1


    @overload
    def ov(x: int) -> int: ...
    @overload
    def ov(x: str) -> str: ...
    def ov(x):
        return x


    async def coro(x):
        return x


    def gen(n):
        yield from range(n)


    def multi(a,
              b): return a + b


    class C:
        class Inner:
            def m(self):
                return 1

        @property
        def p(self):
            return 1

        @p.setter
        def p(self, v):
            self._p = v

        @classmethod
        def cm(cls):
            return cls

        @staticmethod
        def sm():
            return 2

        @abstractmethod
        def am(self):
            ...

        def one(self): return 1
''')


def test_the_stubber_handles_real_python_and_says_what_it_skips():
    used = import_time_names(STUB_CASES)
    reasons = {n: stubbable(STUB_CASES, n, used) for n in function_names(STUB_CASES)}
    assert "calls it while being imported" in reasons.pop("deco")
    assert "shares a line with its header" in reasons.pop("multi")
    assert "abstract" in reasons.pop("C.am")
    assert set(reasons) == {"memo", "decorated", "ov", "coro", "gen", "C.p", "C.cm", "C.sm", "C.one"}
    assert all(r is None for r in reasons.values())
    out = stub_source(STUB_CASES, list(reasons))
    tree = ast.parse(out)
    memo = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "memo")
    assert [type(s).__name__ for s in memo.body] == ["Expr", "Raise"]  # docstring kept, nothing dangles
    assert out.count("@overload") == 2 and 'raise NotImplementedError("ov")' in out
    assert "return 1\n" in out.split("class Inner:")[1].split("@property")[0]  # nested class untouched
    namespace: dict = {}
    exec(compile(out, "stubbed", "exec"), namespace)  # it imports
    with pytest.raises(NotImplementedError):
        namespace["C"]().p
    with pytest.raises(NotImplementedError):
        list(namespace["gen"](2))


@needs_bwrap
def test_skipped_and_xfailed_tests_count_neither_way(tmp_path):
    project = tmp_path / "gridpath"
    shutil.copytree(REPO / "examples" / "playground" / "gridpath", project)
    test_file = next((project / "tests").glob("test_*.py"))
    text = test_file.read_text()
    cls = next(n for n in ast.parse(text).body if isinstance(n, ast.ClassDef))
    extra = ("\n    @unittest.skipIf(True, 'never on this machine')\n    def test_skipped_here(self):\n"
             "        self.fail('skipped')\n\n    @unittest.expectedFailure\n    def test_known_bug(self):\n"
             "        self.assertEqual(1, 2)\n")
    lines = text.splitlines(keepends=True)
    lines.insert(cls.end_lineno, extra)
    test_file.write_text(("import unittest\n" if "import unittest" not in text else "") + "".join(lines))
    (project / "tests" / "data").mkdir()
    (project / "tests" / "data" / "grid.txt").write_text("#.#\n")  # a test fixture travels with the tests
    (project / "gridpath" / "blob.bin").write_bytes(b"\xff\xfe\x00")  # a binary cannot: logged
    out = tmp_path / "tasks"
    proc = ahe("tasks", "derive", "--project", str(project), "--out", str(out), "--max-fix", "2", "--max-reproduce", "1")
    assert proc.returncode == 0, proc.stderr
    assert "2 skipped or xfailed, left out of every task" in " ".join(proc.stderr.split())
    log = json.loads((out / "derive.json").read_text())
    assert {"kind": "file", "candidate": "gridpath/blob.bin"}.items() <= next(
        r for r in log["rejected"] if r["kind"] == "file").items()
    assert all((t / "tests" / "suite" / "data" / "grid.txt").is_file() for t in out.glob("gridpath-fix-*"))
    for grade in out.glob("*/tests/grade.json"):
        ids = [i for group in json.loads(grade.read_text()).get("groups", {}).values() for i in group]
        assert not any(i.endswith(("test_skipped_here", "test_known_bug")) for i in ids), grade
    check = ahe("tasks", "check", str(out), "--json")
    assert check.returncode == 0, check.stdout[-2000:]
