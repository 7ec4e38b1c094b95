"""Run a repository's tests and say, per test, whether it passed (standard library only).

Copied into every SWE-CI task's `tests/` folder and run there by the verifier; the task maker
runs the same file on the host, so base, target and every round are counted the same way.

    python3 runner.py --repo DIR --out results.json [--tests tests] [--command CMD]

* `--command CMD`: a shell command run in DIR that writes a JUnit XML report to the path in
  `$AHE_JUNIT_XML` (for pytest: `python -m pytest tests --junitxml=$AHE_JUNIT_XML`).
* otherwise pytest when the project uses it (`detect_pytest`: pytest.ini, conftest.py, a
  pytest section in pyproject.toml / setup.cfg / tox.ini, a tox command or a test file that
  imports pytest) and this interpreter has it (its JSON report plugin when installed, else
  its JUnit XML; a module that fails to import costs only its own tests), else `unittest`
  discovery in each tests folder. `runner_note` says which and why.

`results.json`: {"runner": ..., "runner_note": ..., "exit_code": ..., "tests": {test_id:
passed|failed|error|skipped}, "messages": {test_id: first lines of the failure}}. Skipped and
expected-to-fail (xfail) tests are both "skipped": they count neither way. `src` and the
repository root are put on PYTHONPATH, as SWE-CI does.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

MESSAGE_CHARS = 600
# pytest's outcomes: an expected failure counts neither way, an unexpected (non-strict) pass passes
_PYTEST_OUTCOMES = {"passed": "passed", "failed": "failed", "skipped": "skipped", "xfailed": "skipped",
                    "xpassed": "passed", "error": "error"}
_PYTEST_SECTIONS = (("pyproject.toml", "[tool.pytest"), ("setup.cfg", "[tool:pytest]"), ("tox.ini", "[pytest]"))
# a module-level test function (`def test_suite()` is unittest's own convention, not a test)
_PLAIN_TEST = re.compile(r"^(async )?def test_(?!suite\()\w*\(", re.M)
_IMPORTS_PYTEST = re.compile(r"^\s*(import pytest|from pytest\b|from _pytest\b)", re.M)


def detect_pytest(repo: Path, tests: list[str]) -> str | None:
    """Why this project's tests are pytest tests (None: plain unittest is enough)."""
    if (repo / "pytest.ini").is_file():
        return "it has pytest.ini"
    for name, marker in _PYTEST_SECTIONS:
        text = _read(repo / name)
        if marker in text:
            return f"{name} has a pytest section"
    if re.search(r"\b(py\.test|pytest)\b", _read(repo / "tox.ini")):
        return "tox.ini runs pytest"
    for folder in [".", *tests]:
        if (repo / folder / "conftest.py").is_file():
            return f"it has {(Path(folder) / 'conftest.py').as_posix()}"
    for folder in tests:
        found = (repo / folder).rglob("*.py") if (repo / folder).is_dir() else [repo / folder]
        for path in sorted(p for p in found if p.is_file()):
            text = _read(path)
            if _IMPORTS_PYTEST.search(text):
                return f"{path.relative_to(repo).as_posix()} imports pytest"
            if path.name.startswith("test") and _PLAIN_TEST.search(text):
                return f"{path.relative_to(repo).as_posix()} has plain test functions (unittest would miss them)"
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _env(repo: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    parts = [str(repo / "src"), str(repo)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


def parse_junit(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Per-test status from a JUnit XML report: 'classname::name' -> status."""
    statuses: dict[str, str] = {}
    messages: dict[str, str] = {}
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        cls, name = case.get("classname") or "", case.get("name") or ""
        test_id = f"{cls}::{name}" if cls else name
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                status = "failed" if child.tag == "failure" else "error"
                messages[test_id] = ((child.get("message") or "") + "\n" + (child.text or "")).strip()[:MESSAGE_CHARS]
                break
            if child.tag == "skipped":
                status = "skipped"
        if statuses.get(test_id) not in ("failed", "error"):
            statuses[test_id] = status
    return statuses, messages


def _run_command(repo: Path, command: str, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        # the interpreter running this file (the task's test environment, when it has one) comes
        # first on PATH, so `python -m pytest ...` in the command uses it
        path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
        proc = subprocess.run(["bash", "-c", command], cwd=repo,
                              env=_env(repo, {"AHE_JUNIT_XML": str(report), "PATH": path}),
                              capture_output=True, text=True, timeout=timeout)
        if not report.is_file():
            raise SystemExit(f"the test command wrote no JUnit XML at $AHE_JUNIT_XML (exit code {proc.returncode}): "
                             f"{(proc.stdout + proc.stderr)[-800:]}")
        statuses, messages = parse_junit(report)
        return {"runner": "command", "exit_code": proc.returncode, "tests": statuses, "messages": messages}


def _run_pytest(repo: Path, tests: list[str], timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        # a test module that does not import (the base often lacks what the target's tests
        # import) must cost its own tests only, not the whole session
        cmd = [sys.executable, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider", "--color=no", f"--rootdir={repo}",
               "--continue-on-collection-errors"]
        json_report = importlib.util.find_spec("pytest_jsonreport") is not None
        report = Path(tmp) / ("report.json" if json_report else "junit.xml")
        cmd += [f"--json-report-file={report}", "--json-report"] if json_report else [f"--junitxml={report}"]
        proc = subprocess.run(cmd, cwd=repo, env=_env(repo), capture_output=True, text=True, timeout=timeout)
        if not report.is_file():
            raise SystemExit(f"pytest wrote no report (exit code {proc.returncode}): {(proc.stdout + proc.stderr)[-800:]}")
        if not json_report:
            statuses, messages = parse_junit(report)
            return {"runner": "pytest-junit", "exit_code": proc.returncode, "tests": statuses, "messages": messages}
        data = json.loads(report.read_text())
        statuses, messages = {}, {}
        for t in data.get("tests", []):
            outcome = t.get("outcome", "error")
            statuses[t["nodeid"]] = _PYTEST_OUTCOMES.get(outcome, "error")
            for stage in ("setup", "call", "teardown"):
                if isinstance(t.get(stage), dict) and t[stage].get("longrepr"):
                    messages[t["nodeid"]] = str(t[stage]["longrepr"])[-MESSAGE_CHARS:]
                    break
        return {"runner": "pytest-json", "exit_code": proc.returncode, "tests": statuses, "messages": messages}


class _Recorder(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.statuses: dict[str, str] = {}
        self.messages: dict[str, str] = {}

    @staticmethod
    def _id(test: unittest.TestCase) -> str:
        return test.id()

    def addSuccess(self, test):  # noqa: N802 - unittest's names
        self.statuses.setdefault(self._id(test), "passed")

    def _bad(self, test, err, status):
        self.statuses[self._id(test)] = status
        self.messages[self._id(test)] = self._exc_info_to_string(err, test)[-MESSAGE_CHARS:]

    def addFailure(self, test, err):  # noqa: N802
        self._bad(test, err, "failed")

    def addError(self, test, err):  # noqa: N802
        self._bad(test, err, "error")

    def addSkip(self, test, reason):  # noqa: N802
        self.statuses[self._id(test)] = "skipped"

    def addExpectedFailure(self, test, err):  # noqa: N802 - an expected failure counts neither way
        self.statuses[self._id(test)] = "skipped"

    def addUnexpectedSuccess(self, test):  # noqa: N802
        self.statuses[self._id(test)] = "failed"

    def addSubTest(self, test, subtest, err):  # noqa: N802
        if err is not None:
            self._bad(test, err, "failed")


def _run_unittest(repo: Path, tests: list[str]) -> dict:
    os.chdir(repo)
    for p in (str(repo), str(repo / "src")):
        sys.path.insert(0, p)
    recorder = _Recorder()
    for folder in tests:
        if not (repo / folder).is_dir():
            continue
        start = repo / folder  # a folder that is no package is its own top level
        top = repo if (start / "__init__.py").is_file() else start
        suite = unittest.TestLoader().discover(str(start), pattern="test*.py", top_level_dir=str(top))
        stream = io.StringIO()
        real = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = stream
        try:
            suite.run(recorder)
        finally:
            sys.stdout, sys.stderr = real
    return {"runner": "unittest", "exit_code": 0 if recorder.wasSuccessful() else 1,
            "tests": recorder.statuses, "messages": recorder.messages}



def run_tests(repo: Path, tests: list[str], command: str | None = None, timeout: float = 1800) -> dict:
    """Statuses of every test in `repo` (see the module docstring)."""
    repo = repo.resolve()
    if command:
        return {**_run_command(repo, command, timeout), "runner_note": "the task's test command"}
    why = detect_pytest(repo, tests)
    if why and importlib.util.find_spec("pytest") is not None:
        return {**_run_pytest(repo, tests, timeout), "runner_note": f"pytest, because {why}"}
    note = ("unittest discovery (no sign of pytest in the project)" if not why else
            f"unittest discovery, although the project uses pytest ({why}): {sys.executable} has no pytest; "
            "give the task a test environment with pytest")
    return {**_run_unittest(repo, tests), "runner_note": note}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--tests", action="append", default=None, help="test folder(s), default: tests")
    ap.add_argument("--command", default=None)
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args(argv)
    result = run_tests(args.repo, args.tests or ["tests"], args.command, args.timeout)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
