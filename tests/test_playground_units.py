"""SWE-Playground building blocks without a sandbox: stubbing, mutation, issue texts, test
removal, the tagged-output parsers, splits and project loading."""

from __future__ import annotations

import ast
import textwrap

import pytest

from ahe.errors import AheError
from ahe.tasks.sources.playground import kinds
from ahe.tasks.sources.playground.generate.parse import parse_plan, parse_proposals
from ahe.tasks.sources.playground.mutation import OPERATORS, interleave, mutants_of
from ahe.tasks.sources.playground.project import load_project
from ahe.tasks.sources.playground.splits import holdout_projects
from ahe.tasks.sources.playground.stubbing import function_names, stub_source, stubbed_names

SOURCE = textwrap.dedent('''
    """A module."""
    import re

    LIMIT = 3


    def clamp(x, lo=0, hi=LIMIT):
        """Keep x in [lo, hi]."""
        if lo > hi:
            raise ValueError("empty range")
        return max(lo, min(x, hi))


    def first(items): return items[0]


    class Box:
        """A box."""

        def __init__(self, size):
            self.size = size

        def fits(self, other):
            """Docstring only."""

        @property
        def big(self):
            return self.size >= 10 and self.size != 99
''').lstrip()


def test_stubbing_keeps_signatures_docstrings_and_other_lines():
    out = stub_source(SOURCE)
    tree = ast.parse(out)
    assert function_names(out) == function_names(SOURCE) == ["clamp", "first", "Box.__init__", "Box.fits", "Box.big"]
    assert stubbed_names(out) == set(function_names(SOURCE))
    assert 'def clamp(x, lo=0, hi=LIMIT):\n    """Keep x in [lo, hi]."""\n    raise NotImplementedError("clamp")' in out
    assert "LIMIT = 3" in out and "import re" in out and "@property" in out
    assert ast.get_docstring(tree.body[-1].body[2]) == "Docstring only."
    assert "return max" not in out and "self.size = size" not in out


def test_stubbing_only_the_named_functions():
    out = stub_source(SOURCE, ["Box.big"])
    assert stubbed_names(out) == {"Box.big"}
    assert "return max(lo, min(x, hi))" in out
    with pytest.raises(KeyError):
        stub_source(SOURCE, ["nope"])


def test_every_operator_makes_compiling_distinct_mutants():
    mutants = mutants_of("pkg/m.py", SOURCE, ["clamp", "first", "Box.big"])
    assert {m.operator for m in mutants} >= {"flip-comparison", "off-by-one", "dropped-guard", "swapped-arguments",
                                            "boolean-operator"}
    assert len({m.source for m in mutants}) == len(mutants)
    for m in mutants:
        compile(m.source, m.file, "exec")
        assert m.source != SOURCE and m.function in ("clamp", "first", "Box.big")
    guard = next(m for m in mutants if m.operator == "dropped-guard")
    assert "empty range" not in guard.source
    order = interleave(mutants)
    assert sorted(m.id for m in order) == sorted(m.id for m in mutants)
    assert len({m.function for m in order[:3]}) == 3  # the first picks spread over the functions
    assert set(OPERATORS) >= {m.operator for m in mutants}


def test_string_concatenation_is_not_turned_into_subtraction():
    src = "def f(a):\n    return [a] + [1]\n\n\ndef g(a, b):\n    return a + b\n"
    ops = [m.change for m in mutants_of("m.py", src, ["f", "g"]) if m.operator == "arithmetic"]
    assert ops == ["`a + b` -> `a - b`"]


def test_issue_text_describes_the_symptom_never_the_location():
    message = textwrap.dedent('''
        Traceback (most recent call last):
          File "/app/v0003/textkit/wrap.py", line 38, in justify
            spaces, extra = divmod(width - length, gaps)
        AssertionError: 'aa   b  c  d' != 'aa  b   c  d'
        - aa   b  c  d
    ''').strip()
    text = kinds.symptom("tests.test_justify.JustifyTest.test_left_gaps_get_extra", message,
                         {"JustifyTest.test_left_gaps_get_extra": "Spare spaces go to the leftmost gaps first."})
    assert "Spare spaces go to the leftmost gaps first" in text and "AssertionError" in text
    assert "wrap.py" not in text and "line 38" not in text and "divmod" not in text


def test_remove_tests_keeps_a_valid_module():
    src = textwrap.dedent('''
        import unittest


        class A(unittest.TestCase):
            def test_one(self):
                pass

            @unittest.skip("x")
            def test_two(self):
                pass


        class B(unittest.TestCase):
            def test_three(self):
                pass
    ''').lstrip()
    out = kinds.remove_tests(src, {"A.test_two", "B.test_three"})
    assert "test_one" in out and "test_two" not in out and "test_three" not in out and "skip" not in out
    compile(out, "t.py", "exec")


def test_proposals_keep_python_stdlib_projects_and_say_why_others_go():
    text = ("<project><name>good</name><package>good</package><description>A fine CLI tool.</description>"
            "<language>python</language><libraries>standard library only</libraries></project>"
            "<project><name>rusty</name><package>rusty</package><description>Written in Rust.</description>"
            "<language>rust</language></project>"
            "<project><name>np</name><package>np</package><description>Needs numpy badly.</description>"
            "<language>python</language><libraries>numpy</libraries></project>")
    found, rejected = parse_proposals(text)
    assert [p.name for p in found] == ["good"]
    assert [r.what for r in rejected] == ["project #2 (rusty)", "project #3 (np)"]
    assert "not Python" in rejected[0].reason and "standard library" in rejected[1].reason


def test_plan_rejects_duplicates_bad_tests_and_modules_outside_the_package():
    text = '''<plan><phase name="p">
    <module path="pkg/a.py"><task name="one"><title>T</title><description>D</description><functions>f, g</functions>
      <test name="test_f" case="happy"><purpose>p</purpose><assertion>a</assertion></test>
      <test name="test_f" case="edge"><purpose>p</purpose><assertion>a</assertion></test>
      <test name="check_g" case="edge"><purpose>p</purpose><assertion>a</assertion></test>
      <test name="test_g" case="sideways"><purpose>p</purpose><assertion>a</assertion></test>
    </task>
    <task name="one"><title>T</title><description>D</description><functions>h</functions>
      <test name="test_h" case="error"><purpose>p</purpose><assertion>a</assertion></test></task>
    <task name="empty"><title>T</title><description>D</description><functions>k</functions></task>
    </module>
    <module path="other/b.py"><task name="x"><functions>y</functions></task></module>
    </phase></plan>'''
    plan = parse_plan(text, "pkg")
    assert [(t.name, [c.name for c in t.checklist]) for t in plan.tasks] == [("one", ["test_f"])]
    reasons = [f"{r.what}: {r.reason}" for r in plan.rejected]
    assert any("duplicate test name" in r for r in reasons)
    assert any("check_g" in r for r in reasons) and any("sideways" in r for r in reasons)
    assert any("duplicate task name" in r for r in reasons)
    assert any(r.startswith("task empty") for r in reasons)
    assert any("other/b.py" in r for r in reasons)


def test_holdout_is_by_project_stable_and_never_everything():
    names = [f"p{i}" for i in range(10)]
    held = holdout_projects(names, 0.3)
    assert len(held) == 3 and held == holdout_projects(list(reversed(names)), 0.3)
    assert holdout_projects(["a", "b"], 0.3) and len(holdout_projects(["a", "b"], 0.9)) == 1
    assert holdout_projects(["a"], 0.0) == []
    with pytest.raises(AheError, match="at least 2 projects"):
        holdout_projects(["a"], 0.3)
    with pytest.raises(AheError, match="below 1"):
        holdout_projects(names, 1.0)


def test_project_errors_name_the_file_and_the_field(tmp_path):
    with pytest.raises(AheError, match="playground.toml: file is missing"):
        load_project(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "playground.toml").write_text(
        '[project]\nname = "p"\ndescription = "d"\npackage = "pkg"\n'
        '[[tasks]]\nname = "t"\ntitle = "T"\ndescription = "D"\nfunctions = ["pkg/m.py"]\n')
    with pytest.raises(AheError, match=r"playground.toml: field `tasks.0.functions`"):
        load_project(tmp_path)
    (tmp_path / "playground.toml").write_text(
        '[project]\nname = "p"\ndescription = "d"\npackage = "pkg"\n'
        '[[tasks]]\nname = "t"\ntitle = "T"\ndescription = "D"\nfunctions = ["pkg/m.py:f"]\n')
    with pytest.raises(AheError, match=r"tests/test_t.py are missing"):
        load_project(tmp_path)


def _cli(*args: str, env: dict | None = None):
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "tasks", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})
    proc.stderr = " ".join(proc.stderr.split())  # rich wraps long lines
    return proc


def test_bad_input_is_one_sentence_and_never_overwrites(tmp_path):
    proc = _cli("derive", "--project", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "no playground.toml found there" in proc.stderr and "Traceback" not in proc.stderr
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "precious.txt").write_text("keep me")
    from pathlib import Path

    seeds = Path(__file__).resolve().parent.parent / "examples" / "playground" / "textkit"
    proc = _cli("derive", "--project", str(seeds), "--out", str(busy))
    assert proc.returncode == 2 and "not empty and was not written by `ahe tasks derive`" in proc.stderr
    assert (busy / "precious.txt").read_text() == "keep me"
    proc = _cli("derive", "--project", str(seeds), "--out", str(tmp_path / "o"), "--holdout", "0.3")
    assert proc.returncode == 2 and "needs at least 2 projects" in proc.stderr
    env = {"AHE_MODEL": "", "OPENAI_BASE_URL": ""}
    proc = _cli("generate", "--out", str(tmp_path / "g"), env=env)
    assert proc.returncode == 2 and "No model is set for the generator role" in proc.stderr
    assert "Traceback" not in proc.stderr
