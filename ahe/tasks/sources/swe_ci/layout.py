"""Write one SWE-CI task folder (Harbor format) from a base tree and a target tree.

    <task>/task.toml            [metadata] source = "swe-ci", the commits; [ci] when rounds
    <task>/instruction.md
    <task>/environment/         the base code with the target's test folders (as SWE-CI does)
    <task>/tests/               test.sh, verify.py, runner.py, metrics.py, config.json,
                                target_tests/ (pristine), expected.json (the counts)
    <task>/solution/solve.sh    applies the target's non-test diff (files/ + deleted.txt)

Both trees are plain folders (no .git); which folders hold tests is `test_dirs`.
"""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

HERE = Path(__file__).resolve().parent
VERIFIER_FILES = ("verify.py", "runner.py", "metrics.py")
IGNORE = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache")

TEST_SH = """#!/bin/bash
# SWE-CI verifier: runs the pristine target tests on a copy of /app and writes reward.json.
# The task's test environment (its interpreter and packages) is at /opt/ahe-env when it has one.
mkdir -p /logs/verifier
PY=python3
[ -x /opt/ahe-env/bin/python ] && PY=/opt/ahe-env/bin/python
"$PY" /tests/verify.py --app /app --logs /logs/verifier "$@"
"""

SOLVE_SH = """#!/bin/bash
# The reference: the target commit's non-test files over the base code.
set -e
while IFS= read -r path; do
  [ -n "$path" ] || continue
  rm -rf -- "/app/$path"
  # a folder the deletions emptied goes too (a renamed <name>-<version>.dist-info)
  case "$path" in */*) (cd /app && rmdir -p --ignore-fail-on-non-empty -- "${path%/*}" 2>/dev/null) || true ;; esac
done < /solution/deleted.txt
cp -a /solution/files/. /app/
"""

INSTRUCTION = """\
The repository in /app is an older version of a project. The test folders ({dirs}) already
come from a newer version of it, and many of those tests fail. Evolve the code so that they
pass, as the project's maintainers did, without breaking what already works. Do not edit the
tests; they are replaced by pristine copies when your work is graded.
"""


class CISettings(BaseModel):
    """[ci] of task.toml: the CI loop of rounds (absent: one-shot grading)."""

    rounds: int = Field(ge=1)
    gamma: float = Field(default=1.0, ge=1.0)


class TaskSpec(BaseModel):
    """What the task maker knows about one task before the tests are counted."""

    name: str
    repo: str
    base_sha: str
    target_sha: str
    test_dirs: list[str] = Field(default_factory=lambda: ["tests"])
    test_command: str | None = None
    ci: CISettings | None = None
    docker_base_image: str | None = Field(default=None, description="FROM of environment/Dockerfile (imported tasks)")
    agent_timeout_sec: float = 1800.0
    verifier_timeout_sec: float = 1800.0
    extra_metadata: dict[str, str | int | float | list[str]] = Field(default_factory=dict)
    test_env: Path | None = None  # a made test environment ([environment] test_env, local tasks)
    docker_env: Any = None  # a TestEnv whose packages the generated Dockerfile installs (docker tasks)


def _toml_value(value: object) -> str:
    return json.dumps(value) if not isinstance(value, (int, float)) or isinstance(value, bool) else repr(value)


def task_toml(spec: TaskSpec) -> str:
    meta = {"source": "swe-ci", "category": "software-evolution", "repo": spec.repo,
            "base_sha": spec.base_sha, "target_sha": spec.target_sha, **spec.extra_metadata}
    lines = ['version = "1.0"', "", "[task]", f"name = {json.dumps(spec.name)}", "", "[metadata]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in meta.items()]
    lines += ['tags = ["swe-ci"]', "", "[agent]", f"timeout_sec = {spec.agent_timeout_sec!r}", "",
              "[verifier]", f"timeout_sec = {spec.verifier_timeout_sec!r}"]
    if spec.ci is not None:
        lines += ["", "[ci]", f"rounds = {spec.ci.rounds}", f"gamma = {spec.ci.gamma!r}"]
    if spec.test_env is not None:
        lines += ["", "[environment]", f"test_env = {json.dumps(str(spec.test_env))}"]
    return "\n".join(lines) + "\n"


def _files(root: Path, test_dirs: list[str]) -> set[str]:
    """Relative paths of the non-test files of a tree."""
    tops = {d.split("/")[0] for d in test_dirs}
    out = set()
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if rel.parts[0] in tops or ".git" in rel.parts or "__pycache__" in rel.parts:
            continue
        if p.is_file() or p.is_symlink():
            out.add(rel.as_posix())
    return out


def write_task(spec: TaskSpec, base: Path, target: Path, out: Path) -> Path:
    """Lay the task folder out at `out` (which must not exist); expected.json comes later."""
    missing = [d for d in spec.test_dirs if not (target / d).exists()]
    if missing:
        raise FileNotFoundError(f"the target commit {spec.target_sha[:12]} has no test folder {', '.join(missing)}; "
                                "name the test folders with --tests-dir")
    out.mkdir(parents=True)
    (out / "task.toml").write_text(task_toml(spec))
    (out / "instruction.md").write_text(INSTRUCTION.format(dirs=", ".join(spec.test_dirs)))

    env = out / "environment"
    app = env / "app" if spec.docker_base_image else env
    shutil.copytree(base, app, symlinks=True, ignore=IGNORE)
    for d in spec.test_dirs:
        shutil.rmtree(app / d, ignore_errors=True)
        copy_tests(target / d, app / d)
    if spec.docker_base_image and spec.docker_env is None:
        (env / "Dockerfile").write_text(
            f"FROM {spec.docker_base_image}\nCOPY app/ /app/\nWORKDIR /app\n"
        )

    tests = out / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text(TEST_SH)
    for name in VERIFIER_FILES:
        shutil.copy2(HERE / name, tests / name)
    config = {"test_dirs": spec.test_dirs, "command": spec.test_command, "timeout_sec": spec.verifier_timeout_sec}
    (tests / "config.json").write_text(json.dumps(config, indent=1))
    for d in spec.test_dirs:
        copy_tests(target / d, tests / "target_tests" / d)

    _write_solution(out / "solution", base, target, spec.test_dirs)
    return out


def copy_tests(src: Path, dst: Path) -> None:
    """A test folder, or a single test file (e.g. a root-level test_x.py)."""
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True, ignore=IGNORE)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def _write_solution(sol: Path, base: Path, target: Path, test_dirs: list[str]) -> None:
    before, after = _files(base, test_dirs), _files(target, test_dirs)
    files = sol / "files"
    files.mkdir(parents=True)
    for rel in sorted(after):
        src = target / rel
        if rel in before and not src.is_symlink() and filecmp.cmp(base / rel, src, shallow=False):
            continue
        (files / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, files / rel, follow_symlinks=False)
    (sol / "deleted.txt").write_text("".join(f"{rel}\n" for rel in sorted(before - after)))
    (sol / "solve.sh").write_text(SOLVE_SH)


def write_expected(task_dir: Path, expected: dict) -> None:
    (task_dir / "tests" / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True))
