"""Write one derived task as a Harbor-format folder (docs/task-format.md).

```
<name>/task.toml  instruction.md
       environment/<package>/…          the code the agent starts from (copied to /app)
       tests/test.sh  grade.py  grade.json  suite/test_*.py | buggy.tar.gz reference.tar.gz
       solution/solve.sh                 writes the reference files back (the oracle)
```
"""

from __future__ import annotations

import base64
import json
import io
import shutil
import tarfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ahe.io import atomic_write_json
from ahe.tasks.sources.playground.runner import GRADER

Kind = Literal["implement", "library", "fix", "reproduce"]
_EOF = "AHE_PLAYGROUND_EOF"

TEST_SH = """#!/bin/bash
# SWE-Playground verifier: grade.py runs the hidden tests in a fresh copy and writes reward.json.
# The project's test environment (interpreter and packages) is at /opt/ahe-env when it has one.
mkdir -p /logs/verifier
PY=python3
[ -x /opt/ahe-env/bin/python ] && PY=/opt/ahe-env/bin/python
"$PY" -B /tests/grade.py grade /tests/grade.json
"""


class DerivedTask(BaseModel):
    """Everything needed to write one task folder; `details` goes to the derivation log."""

    name: str
    kind: Kind
    project: str
    title: str
    instruction: str
    difficulty: str = "medium"
    environment: dict[str, str] = Field(default_factory=dict)  # files of /app, relative
    suite: dict[str, str] = Field(default_factory=dict)  # tests/suite/<file>
    archives: dict[str, dict[str, str]] = Field(default_factory=dict)  # tests/<name>.tar.gz: files
    grade: dict = Field(default_factory=dict)
    solution: dict[str, str] = Field(default_factory=dict)  # /app-relative files solve.sh writes
    details: dict = Field(default_factory=dict)
    test_env: str | None = None  # the project's test environment folder ([environment] test_env)


def tarball(files: dict[str, str]) -> bytes:
    """A reproducible .tar.gz (sorted names, zero times) of {relative path: text}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(files):
            data = files[rel].encode("utf-8")
            info = tarfile.TarInfo(rel)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def solve_script(files: dict[str, str]) -> str:
    """A solve.sh that writes each file under /app exactly (heredoc, or base64 when needed)."""
    parts = ["#!/bin/bash", "# The reference: write the original files back.", "set -euo pipefail", "cd /app"]
    for rel in sorted(files):
        text = files[rel]
        parent = str(Path(rel).parent)
        if parent != ".":
            parts.append(f"mkdir -p {parent}")
        if text.endswith("\n") and _EOF not in text:
            parts.append(f"cat > {rel} <<'{_EOF}'\n{text}{_EOF}")
        else:
            b64 = base64.b64encode(text.encode("utf-8")).decode()
            parts.append(f"base64 -d > {rel} <<'{_EOF}'\n{b64}\n{_EOF}")
    return "\n".join(parts) + "\n"


def task_toml(task: DerivedTask) -> str:
    tags = ", ".join(f'"{t}"' for t in ("python", "swe-playground", task.kind, task.project))
    return (f'[task]\nname = "{task.name}"\n\n[metadata]\ndifficulty = "{task.difficulty}"\n'
            f'category = "playground-{task.kind}"\ntags = [{tags}]\nsource = "swe-playground"\n'
            f'project = "{task.project}"\nkind = "{task.kind}"\n\n[agent]\ntimeout_sec = 900\n\n'
            "[verifier]\ntimeout_sec = 180\n\n[environment]\ncpus = 1\nmemory_mb = 1024\n"
            + (f"test_env = {json.dumps(task.test_env)}\n" if task.test_env else ""))


def write_task(task: DerivedTask, out_dir: Path) -> Path:
    """Write the folder under `out_dir` (replacing an older one of the same name)."""
    final = out_dir / task.name
    tmp = out_dir / f".{task.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "task.toml").write_text(task_toml(task))
    (tmp / "instruction.md").write_text(task.instruction.rstrip() + "\n")
    for rel, text in task.environment.items():
        _write(tmp / "environment" / rel, text)
    tests = tmp / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text(TEST_SH)
    (tests / "test.sh").chmod(0o755)
    shutil.copy2(GRADER, tests / "grade.py")
    atomic_write_json(tests / "grade.json", {"kind": task.kind, **task.grade})
    for rel, text in task.suite.items():
        _write(tests / "suite" / rel, text)
    for name, files in task.archives.items():
        (tests / name).write_bytes(tarball(files))
    _write(tmp / "solution" / "solve.sh", solve_script(task.solution))
    (tmp / "solution" / "solve.sh").chmod(0o755)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    return final


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
