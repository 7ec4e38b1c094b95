"""Run folders built once per test session and shared by every module and pytest-xdist worker.

The demo's `ahe evolve` takes a minute or two; a module-scoped fixture builds it again in every
module and on every worker that runs one of its tests. `shared_build` is the pytest-xdist recipe:
the first worker to ask builds under a file lock in the session's shared temporary folder
(`tmp_path_factory.getbasetemp().parent`), the others wait and get the same folder. What it
returns is read-only to the tests: one that changes a run copies it first (`copy_run`).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_build(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name`, filled by `build(folder)` once in the whole session. A build that failed
    fails every test that asks for it again, with the first failure's message (not built twice)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-runs"
    root.mkdir(exist_ok=True)
    folder, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when a worker dies
        if failed.exists():
            pytest.fail(f"building the shared run {name!r} failed before in this session:\n{failed.read_text()}")
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that died while building it
            folder.mkdir()
            try:
                build(folder)
            except BaseException as e:
                failed.write_text(f"{type(e).__name__}: {e}"[-6000:])
                raise
            done.write_text("")
    return folder


def copy_run(run: Path, dest: Path, **kw) -> Path:
    """A private copy of a shared run, for a test that changes it (workspace links kept as links)."""
    shutil.copytree(run, dest, symlinks=True, **kw)
    return dest


def ahe(*args: str, env: dict | None = None, timeout: float = 400) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ahe.cli", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, env={**os.environ, "COLUMNS": "250", **(env or {})})


def tree_json(run: Path) -> dict:
    return json.loads((run / "tree.json").read_text())


def judged_best(run: Path) -> dict:
    """The tree's `best` node, after checking it was judged: evaluated, with an interval, tagged, in scores.json."""
    import git

    t = tree_json(run)
    best = next(n for n in t["nodes"] if n["id"] == t["best"])
    assert best["n_trials"] > 0 and "estimated pass@1" in t["best_reason"] and "[" in t["best_reason"]
    assert git.Repo(run / "workspace").commit("best").hexsha == best["commit"]
    scores = json.loads((run / "scores.json").read_text())
    assert scores["best_commit"] == best["commit"]
    return best


def evolved(folder: Path, yaml_tail: str = "", **demo) -> None:
    """`ahe evolve -q` of `write_demo(folder, **demo)` into folder/run, `yaml_tail` appended to its config."""
    from ahe.demo import write_demo

    cfg = write_demo(folder, **demo)
    if yaml_tail:
        cfg.write_text(cfg.read_text() + yaml_tail)
    proc = ahe("evolve", str(cfg), "--run-dir", str(folder / "run"), "-q")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def tree_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`ahe demo DIR --search tree` (write_demo(DIR, search="tree"), then `ahe evolve` into DIR/run), once a
    session; its stdout and stderr kept next to DIR (stdout.txt, stderr.txt). Returns DIR."""
    def build(folder: Path) -> None:
        proc = ahe("demo", str(folder / "demo"), "--search", "tree")
        (folder / "stdout.txt").write_text(proc.stdout)
        (folder / "stderr.txt").write_text(proc.stderr)
        assert proc.returncode == 0, proc.stderr[-3000:]

    return shared_build(tmp_path_factory, "tree-demo", build) / "demo"


def line_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo (`search: line`, 3 iterations, k=2) through `ahe evolve -q`, once a session: the run folder."""
    return shared_build(tmp_path_factory, "line-demo", evolved) / "run"


def mini_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`ahe demo DIR --backend mini-swe-agent --quiet` once a session: the run folder (needs mini-swe-agent)."""
    def build(folder: Path) -> None:
        proc = ahe("demo", str(folder / "demo"), "--backend", "mini-swe-agent", "--quiet")
        assert proc.returncode == 0, proc.stderr[-3000:]

    return shared_build(tmp_path_factory, "mini-demo", build) / "demo" / "run"
