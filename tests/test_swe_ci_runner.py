"""The test runner shipped into SWE-CI tasks: per-test statuses from pytest, unittest or a
custom command (JUnit XML), with the same ids on every run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[1] / "ahe" / "tasks" / "sources" / "swe_ci" / "runner.py"


@pytest.fixture
def repo(tmp_path) -> Path:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "__init__.py").write_text("def double(x):\n    return 2 * x\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_pkg.py").write_text(
        "import unittest\nfrom pkg import double\n\n\nclass T(unittest.TestCase):\n"
        "    def test_ok(self):\n        self.assertEqual(double(2), 4)\n\n"
        "    def test_bad(self):\n        self.assertEqual(double(2), 5)\n\n"
        "    @unittest.skip('later')\n    def test_skip(self):\n        pass\n\n"
        "    @unittest.expectedFailure\n    def test_xfail(self):\n        self.assertEqual(1, 2)\n")
    (tmp_path / "tests" / "test_broken.py").write_text("import no_such_module\n")
    return tmp_path


def run(python: str, repo: Path, *extra: str) -> dict:
    out = repo.parent / f"out-{len(extra)}.json"
    subprocess.run([python, str(RUNNER), "--repo", str(repo), "--out", str(out), *extra], check=True, timeout=120)
    return json.loads(out.read_text())


def test_pytest_mode_when_the_project_uses_pytest(repo):
    (repo / "pytest.ini").write_text("[pytest]\n")
    res = run(sys.executable, repo)  # this interpreter has pytest
    assert res["runner"] in ("pytest-junit", "pytest-json")
    assert res["runner_note"] == "pytest, because it has pytest.ini"
    tests = res["tests"]
    ok = next(k for k in tests if k.endswith("test_ok"))
    bad = next(k for k in tests if k.endswith("test_bad"))
    assert tests[ok] == "passed" and tests[bad] == "failed"
    assert tests[next(k for k in tests if k.endswith("test_skip"))] == "skipped"
    assert tests[next(k for k in tests if k.endswith("test_xfail"))] == "skipped"  # counts neither way
    assert "5" in res["messages"][bad]
    assert any(s == "error" for k, s in tests.items() if "broken" in k)  # a module that does not import


@pytest.mark.parametrize("marker, why", [
    ({"tox.ini": "[testenv]\ncommands =\n    py.test {posargs}\n"}, "tox.ini runs pytest"),
    ({"setup.cfg": "[tool:pytest]\naddopts = -q\n"}, "setup.cfg has a pytest section"),
    ({"pyproject.toml": "[tool.pytest.ini_options]\n"}, "pyproject.toml has a pytest section"),
    ({"tests/conftest.py": ""}, "it has tests/conftest.py"),
    ({"tests/test_p.py": "import pytest\n"}, "tests/test_p.py imports pytest"),
    ({"tests/test_p.py": "def test_x():\n    assert 1\n"},
     "tests/test_p.py has plain test functions (unittest would miss them)"),
])
def test_runner_detection_says_why(repo, marker, why):
    from ahe.tasks.sources.swe_ci.runner import detect_pytest

    assert detect_pytest(repo, ["tests"]) is None
    for rel, text in marker.items():
        (repo / rel).write_text(text)
    assert detect_pytest(repo, ["tests"]) == why


def test_unittest_mode_without_pytest_signs(repo):
    res = run(sys.executable, repo, "--command", "")  # empty command: the default runners
    assert res["runner"] == "unittest"  # pytest is importable, but the project does not use it
    assert res["runner_note"] == "unittest discovery (no sign of pytest in the project)"
    assert res["tests"]["tests.test_pkg.T.test_ok"] == "passed"
    assert res["tests"]["tests.test_pkg.T.test_bad"] == "failed"
    assert res["tests"]["tests.test_pkg.T.test_skip"] == "skipped"
    assert res["tests"]["tests.test_pkg.T.test_xfail"] == "skipped"
    assert "AssertionError: 4 != 5" in res["messages"]["tests.test_pkg.T.test_bad"]
    assert any(s == "error" and "test_broken" in k for k, s in res["tests"].items())


def test_a_pytest_project_without_pytest_says_so(repo):
    (repo / "pytest.ini").write_text("[pytest]\n")
    isolated = subprocess.run([sys.executable, "-S", "-c", "import pytest"], capture_output=True)
    if isolated.returncode == 0:
        pytest.skip("pytest importable without site-packages; cannot exercise the unittest fallback")
    out = repo.parent / "u.json"
    subprocess.run([sys.executable, "-S", str(RUNNER), "--repo", str(repo), "--out", str(out)], check=True, timeout=120)
    res = json.loads(out.read_text())
    assert res["runner"] == "unittest"
    assert "the project uses pytest (it has pytest.ini)" in res["runner_note"]
    assert "has no pytest" in res["runner_note"]


def test_custom_command_writes_junit(repo):
    cmd = f"{sys.executable} -m pytest tests -q -p no:cacheprovider --continue-on-collection-errors --junitxml=$AHE_JUNIT_XML"
    res = run(sys.executable, repo, "--command", cmd)
    assert res["runner"] == "command"
    assert sorted(s for k, s in res["tests"].items() if "test_pkg" in k) == ["failed", "passed", "skipped", "skipped"]  # xfail is skipped
