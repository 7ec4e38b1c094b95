#!/usr/bin/env python3
"""The grader of SWE-Playground tasks (stdlib only; copied into every task's tests/).

    grade.py run ROOT OUT.json     run ROOT/tests/test_*.py (top level ROOT), write each
                                   test id's outcome: pass | fail | error | skip
    grade.py grade CONFIG.json     the verifier: build the trees the task kind needs, run the
                                   tests in a child process each, write /logs/verifier/reward.json

An import error of a test module and NotImplementedError count as failures (errors). Every
run is a separate process with a timeout, so a hanging or crashing solution only loses.
"""

import json
import os
import shutil
import subprocess
import sys
import tarfile
import unittest

RUN_TIMEOUT = float(os.environ.get("PLAYGROUND_RUN_TIMEOUT", "60"))
LOGS = "/logs/verifier"


class _Record(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.outcomes = {}

    def addSuccess(self, test):
        self.outcomes[test.id()] = "pass"

    def addFailure(self, test, err):
        self.outcomes[test.id()] = "fail"
        self.failures.append((test, self._exc_info_to_string(err, test)))

    def addError(self, test, err):
        self.outcomes[test.id()] = "error"
        self.errors.append((test, self._exc_info_to_string(err, test)))

    def addSkip(self, test, reason):
        self.outcomes[test.id()] = "skip"

    def addExpectedFailure(self, test, err):
        self.outcomes[test.id()] = "fail"

    def addUnexpectedSuccess(self, test):
        self.outcomes[test.id()] = "fail"


def _last_lines(text, n=6):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


def run_tests(root, out):
    """Run the tests under root/tests in this process; write {tests, messages} to `out`."""
    root, out = os.path.abspath(root), os.path.abspath(out)
    os.chdir(root)
    sys.path.insert(0, root)
    result = _Record()
    if os.path.isdir(os.path.join(root, "tests")):
        suite = unittest.defaultTestLoader.discover(os.path.join(root, "tests"), top_level_dir=root)
        suite.run(result)
    messages = {t.id(): _last_lines(text) for t, text in result.failures + result.errors}
    with open(out, "w") as f:
        json.dump({"tests": result.outcomes, "messages": messages}, f, indent=1)


def _child(root, out):
    """Run the tests of `root` in a child process; {} when it hangs or dies."""
    try:
        subprocess.run([sys.executable, os.path.abspath(__file__), "run", root, out],
                       timeout=RUN_TIMEOUT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)["tests"]
    except (subprocess.TimeoutExpired, OSError, ValueError, KeyError):
        return {}


def _tree(name, package_from, tests_from, package):
    """A fresh tree /tmp/grade/<name> with the package copied from a folder or a tarball."""
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
    kind, package = cfg["kind"], cfg["package"]
    if kind == "reproduce":
        agent_tests = os.path.join(cfg.get("app", "/app"), "tests")
        buggy = _child(_tree("buggy", os.path.join(here, "buggy.tar.gz"), agent_tests, package), "/tmp/grade/buggy.json")
        fixed = _child(_tree("fixed", os.path.join(here, "reference.tar.gz"), agent_tests, package), "/tmp/grade/fixed.json")
        fails_on_buggy = any(v in ("fail", "error") for v in buggy.values())
        passes_on_fixed = bool(fixed) and all(v in ("pass", "skip") for v in fixed.values())
        reward = {"fails_on_buggy": float(fails_on_buggy), "passes_on_reference": float(passes_on_fixed),
                  "tests": float(len(fixed))}
        reward["reward"] = float(fails_on_buggy and passes_on_fixed)
        return reward
    outcomes = _child(_tree("work", cfg.get("app", "/app"), os.path.join(here, "suite"), package), "/tmp/grade/work.json")
    groups = cfg["groups"]  # {name: [test ids]}
    every = [i for ids in groups.values() for i in ids]
    passed = sum(outcomes.get(i) == "pass" for i in every)
    reward = {"passed": float(passed), "total": float(len(every))}
    for name, ids in groups.items():
        reward[name] = _fraction(outcomes, ids)
    reward["reward"] = float(passed == len(every))
    return reward


def main(argv):
    if len(argv) == 3 and argv[0] == "run":
        run_tests(argv[1], argv[2])
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
