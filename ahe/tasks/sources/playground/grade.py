#!/usr/bin/env python3
"""The grader of SWE-Playground tasks (stdlib only; copied into every task's tests/).

    grade.py run ROOT OUT.json [unittest|pytest]
                                   run ROOT/tests/test_*.py (top level ROOT), write each
                                   test id's outcome: pass | fail | error | skip
    grade.py grade CONFIG.json     the verifier: build the trees the task kind needs, run the
                                   tests in a child process each, write /logs/verifier/reward.json

An import error of a test module and NotImplementedError count as failures (errors). Skipped
and expected-to-fail (xfail) tests are "skip": they are in no graded group. Under pytest a
test's id is its JUnit class name and name ("tests.test_x.Class.test_y", "tests.test_x.test_z"),
the same as unittest's for TestCase tests. Every run is a separate process with a timeout, so
a hanging or crashing solution only loses.
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
import unittest
import xml.etree.ElementTree as ET

RUN_TIMEOUT = float(os.environ.get("PLAYGROUND_RUN_TIMEOUT", "60"))
LOGS = "/logs/verifier"


class _Record(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.outcomes = {}

    def addSuccess(self, test):  # a test id run twice keeps its worst outcome
        self.outcomes.setdefault(test.id(), "pass")

    def addFailure(self, test, err):
        self.outcomes[test.id()] = "fail"
        self.failures.append((test, self._exc_info_to_string(err, test)))

    def addError(self, test, err):
        self.outcomes[test.id()] = "error"
        self.errors.append((test, self._exc_info_to_string(err, test)))

    def addSkip(self, test, reason):
        self.outcomes.setdefault(test.id(), "skip")

    def addExpectedFailure(self, test, err):  # an expected failure counts neither way
        self.outcomes.setdefault(test.id(), "skip")

    def addSubTest(self, test, subtest, err):
        if err is not None:
            self.outcomes[test.id()] = "fail"
            self.failures.append((test, self._exc_info_to_string(err, test)))

    def addUnexpectedSuccess(self, test):
        self.outcomes[test.id()] = "fail"


def _last_lines(text, n=6):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


def run_tests(root, out, runner="unittest"):
    """Run the tests under root/tests; write {tests, messages} to `out`."""
    root, out = os.path.abspath(root), os.path.abspath(out)
    if runner == "pytest":
        outcomes, messages = _pytest(root, out + ".xml")
    else:
        outcomes, messages = _unittest(root)
    with open(out, "w") as f:
        json.dump({"tests": outcomes, "messages": messages}, f, indent=1)


def _import_paths(root):
    """The tree's root, and its src/ first in a src layout."""
    return [os.path.join(root, "src"), root] if os.path.isdir(os.path.join(root, "src")) else [root]


def _unittest(root):
    os.chdir(root)
    sys.path[:0] = _import_paths(root)
    result = _Record()
    if os.path.isdir(os.path.join(root, "tests")):
        suite = unittest.defaultTestLoader.discover(os.path.join(root, "tests"), top_level_dir=root)
        suite.run(result)
    return result.outcomes, {t.id(): _last_lines(text) for t, text in result.failures + result.errors}


def _pytest(root, report):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(_import_paths(root)), PYTHONDONTWRITEBYTECODE="1")
    subprocess.run([sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider", "--color=no",
                    "--rootdir", root, "-o", "addopts=", "--continue-on-collection-errors", "--junitxml", report],
                   cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    outcomes, messages = {}, {}
    for case in ET.parse(report).getroot().iter("testcase"):
        cls, name = case.get("classname") or "", case.get("name") or ""
        test_id = "%s.%s" % (cls, name) if cls else name
        outcome = "pass"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "fail" if child.tag == "failure" else "error"
                messages[test_id] = _last_lines((child.get("message") or "") + "\n" + (child.text or ""))
                break
            if child.tag == "skipped":
                outcome = "skip"
        if outcomes.get(test_id) not in ("fail", "error"):
            outcomes[test_id] = outcome
    return outcomes, messages


def _child(root, out, runner="unittest"):
    """Run the tests of `root` in a child process; {} when it hangs or dies."""
    try:
        subprocess.run([sys.executable, os.path.abspath(__file__), "run", root, out, runner],
                       timeout=RUN_TIMEOUT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)["tests"]
    except (subprocess.TimeoutExpired, OSError, ValueError, KeyError):
        return {}


def _tree(name, package_from, tests_from, package, also=()):
    """A fresh tree /tmp/grade/<name> with the package (`pkg` or `src/pkg`) and the files its
    build adds beside it (`also`: a dist-info) copied from a folder, or from a tarball."""
    root = os.path.join("/tmp/grade", name)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    if package_from.endswith(".tar.gz"):
        with tarfile.open(package_from) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(root, filter="data")
            else:
                tar.extractall(root)
    elif os.path.isdir(os.path.join(package_from, package)):
        shutil.copytree(os.path.join(package_from, package), os.path.join(root, package),
                        ignore=shutil.ignore_patterns("__pycache__"))
        for rel in also:
            if os.path.isfile(os.path.join(package_from, rel)):
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                shutil.copy2(os.path.join(package_from, rel), os.path.join(root, rel))
    if tests_from and os.path.isdir(tests_from):
        shutil.copytree(tests_from, os.path.join(root, "tests"), ignore=shutil.ignore_patterns("__pycache__"))
    os.makedirs(os.path.join(root, "tests"), exist_ok=True)
    open(os.path.join(root, "tests", "__init__.py"), "a").close()
    return root


def _fraction(outcomes, ids):
    return sum(outcomes.get(i) == "pass" for i in ids) / len(ids) if ids else 1.0


def grade(config_path):
    with open(config_path) as f:
        cfg = json.load(f)
    here = os.path.dirname(os.path.abspath(config_path))
    kind, package, runner = cfg["kind"], cfg["package"], cfg.get("runner", "unittest")
    if kind == "reproduce":
        agent_tests = os.path.join(cfg.get("app", "/app"), "tests")
        buggy = _child(_tree("buggy", os.path.join(here, "buggy.tar.gz"), agent_tests, package), "/tmp/grade/buggy.json", runner)
        fixed = _child(_tree("fixed", os.path.join(here, "reference.tar.gz"), agent_tests, package), "/tmp/grade/fixed.json", runner)
        fails_on_buggy = any(v in ("fail", "error") for v in buggy.values())
        passes_on_fixed = bool(fixed) and all(v in ("pass", "skip") for v in fixed.values())
        reward = {"fails_on_buggy": float(fails_on_buggy), "passes_on_reference": float(passes_on_fixed),
                  "tests": float(len(fixed))}
        reward["reward"] = float(fails_on_buggy and passes_on_fixed)
        return reward
    outcomes = _child(_tree("work", cfg.get("app", "/app"), os.path.join(here, "suite"), package, cfg.get("also", ())),
                      "/tmp/grade/work.json", runner)
    groups = cfg["groups"]  # {name: [test ids]}
    every = [i for ids in groups.values() for i in ids]
    passed = sum(outcomes.get(i) == "pass" for i in every)
    reward = {"passed": float(passed), "total": float(len(every))}
    for name, ids in groups.items():
        reward[name] = _fraction(outcomes, ids)
    reward["reward"] = float(passed == len(every))
    return reward


def main(argv):
    if len(argv) in (3, 4) and argv[0] == "run":
        run_tests(*argv[1:])
        return 0
    if len(argv) == 2 and argv[0] == "grade":
        os.makedirs(LOGS, exist_ok=True)
        with open(os.path.join(LOGS, "reward.json"), "w") as f:
            json.dump({"reward": 0.0}, f)
        reward = grade(argv[1])
        with open(os.path.join(LOGS, "reward.json"), "w") as f:
            json.dump(reward, f, indent=1)
        print(json.dumps(reward))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
