"""`ahe tasks derive` on the bundled seed projects, end to end: real bwrap, real test runs.

The derived set must hold at least 20 tasks of all four kinds, split by project, and pass
`ahe tasks check`; every fix task's bug is caught by a test while the reference passes all,
and a mutation that no test catches is never emitted.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ahe.tasks.check import check_tasks
from ahe.tasks.loader import load_tasks
from ahe.tasks.sources.playground.derive import DeriveLimits
from ahe.tasks.sources.playground.runner import SandboxRunner
from ahe.tasks.sources.playground.taskset import derive_task_set

REPO = Path(__file__).resolve().parent.parent
SEEDS = REPO / "examples" / "playground"
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.fixture(scope="module")
def derived(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("derived") / "tasks"
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "tasks", "derive", "--project", str(SEEDS),
                           "--out", str(out), "--holdout", "0.3"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "derived into" in proc.stdout and "ahe tasks check" in proc.stdout
    return out


def _log(out: Path) -> dict:
    return json.loads((out / "derive.json").read_text())


def test_the_seed_projects_give_at_least_20_tasks_of_every_kind_split_by_project(derived):
    log = _log(derived)
    assert len(log["tasks"]) >= 20
    assert set(log["counts"]) == {"implement", "library", "fix", "reproduce"}
    assert log["projects"] == ["gridpath", "textkit"] and len(log["holdout"]) == 1
    for t in log["tasks"]:
        assert t["split"] == ("holdout" if t["project"] in log["holdout"] else "train")
        assert (derived / t["path"] / "task.toml").is_file() and t["path"].startswith(t["split"] + "/")
    # the seed textkit project alone already yields 20+ tasks
    assert sum(t["project"] == "textkit" for t in log["tasks"]) >= 20


def test_a_sample_of_every_kind_passes_ahe_tasks_check(derived):
    """Oracle passes, do-nothing fails, tests unreadable: one task per kind and project."""
    picked, seen = [], set()
    for split in ("train", "holdout"):
        loaded = load_tasks(derived / split)
        assert not loaded.errors
        for task in loaded.tasks:
            key = (task.metadata["project"], task.metadata["kind"])
            if key not in seen:
                seen.add(key)
                picked.append(task)
    assert len(picked) == 8
    report = asyncio.run(check_tasks(picked, concurrency=4))
    bad = [(r.name, r.oracle.detail, r.nop.detail, r.leak.detail) for r in report.tasks if not r.ok]
    assert not bad
    assert all(r.leak.status == "ok" for r in report.tasks)  # not even a warning


def _tree(task_dir: Path, app_files: dict[str, str]) -> dict[str, str]:
    suite = {f"tests/{p.name}": p.read_text() for p in (task_dir / "tests" / "suite").glob("*.py")}
    return {**app_files, **suite}


def _env(task_dir: Path) -> dict[str, str]:
    env = task_dir / "environment"
    return {str(p.relative_to(env)): p.read_text() for p in env.rglob("*.py")}


def _solution(task_dir: Path) -> dict[str, str]:
    """The files solve.sh writes, parsed back from its heredocs."""
    text = (task_dir / "solution" / "solve.sh").read_text()
    files = {}
    for block in text.split("cat > ")[1:]:
        rel, _, rest = block.partition(" <<'AHE_PLAYGROUND_EOF'\n")
        files[rel] = rest.split("AHE_PLAYGROUND_EOF")[0]
    return files


def test_every_fix_bug_is_caught_and_the_reference_passes_all(derived):
    log = _log(derived)
    fixes = [t for t in log["tasks"] if t["kind"] == "fix"]
    assert len(fixes) >= 6

    async def run() -> None:
        async with SandboxRunner() as runner:
            for t in fixes:
                task_dir = derived / t["path"]
                groups = json.loads((task_dir / "tests" / "grade.json").read_text())["groups"]
                assert groups["fail_to_pass"], t["name"]
                buggy = await runner.run(_tree(task_dir, _env(task_dir)))
                fixed = await runner.run(_tree(task_dir, {**_env(task_dir), **_solution(task_dir)}))
                assert all(buggy.tests.get(i) != "pass" for i in groups["fail_to_pass"]), t["name"]
                assert all(buggy.tests.get(i) == "pass" for i in groups["pass_to_pass"]), t["name"]
                assert fixed.all_pass and set(fixed.tests) == set(groups["fail_to_pass"] + groups["pass_to_pass"])
                instruction = (task_dir / "instruction.md").read_text()
                assert t["details"]["where"].split(":")[0] not in instruction  # never the file
                assert ".py" not in instruction

    asyncio.run(run())


UNCAUGHT = {
    "playground.toml": '''
        [project]
        name = "halfcov"
        description = "Two functions, only one of them tested."
        package = "halfcov"

        [[tasks]]
        name = "core"
        title = "Core"
        description = "double and describe"
        functions = ["halfcov/core.py:double", "halfcov/core.py:describe"]
    ''',
    "halfcov/__init__.py": "",
    "halfcov/core.py": '''
        def double(x):
            if x is None:
                raise ValueError("no value")
            return x * 2


        def describe(items):
            if len(items) > 3:
                return "many"
            return "few" if items else "none"
    ''',
    "tests/__init__.py": "",
    "tests/test_core.py": '''
        import unittest

        from halfcov.core import double


        class DoubleTest(unittest.TestCase):
            def test_double(self):
                self.assertEqual(double(21), 42)

            def test_none(self):
                with self.assertRaises(ValueError):
                    double(None)
    ''',
}


def test_a_mutation_no_test_catches_is_never_emitted(tmp_path):
    project = tmp_path / "halfcov"
    for rel, text in UNCAUGHT.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(textwrap.dedent(text).lstrip())
    report = derive_task_set([project], tmp_path / "out", limits=DeriveLimits(max_fix=20, max_reproduce=0,
                                                                              max_mutants_tried=100))
    survivors = [r for r in report.rejected if r.reason.startswith("no test catches it")]
    assert survivors and all("describe" in r.candidate for r in survivors)
    assert len(survivors) >= 4  # every mutant of the untested function survives
    fixes = [t for t in report.tasks if t.kind == "fix"]
    assert fixes and all("in double" in t.details["where"] for t in fixes)
    assert report.mutants_tried == len(fixes) + len(report.rejected)


def test_the_playground_source_derives_once_and_gives_one_split(tmp_path):
    from ahe.errors import AheError
    from ahe.tasks.sources import open_source

    source = open_source(f"playground:{SEEDS}?split=holdout&holdout=0.3")
    assert "holdout" in source.describe()
    folder = source.produce(tmp_path / "playground")
    assert folder == tmp_path / "playground" / "holdout"
    names = sorted(p.name for p in folder.iterdir())
    assert names and all(n.startswith("gridpath-") for n in names)
    stamp = (tmp_path / "playground" / "derive.json").stat().st_mtime_ns
    assert open_source(f"playground:{SEEDS}?split=train").produce(tmp_path / "playground") == tmp_path / "playground" / "train"
    assert (tmp_path / "playground" / "derive.json").stat().st_mtime_ns == stamp  # reused, not derived again
    with pytest.raises(AheError, match="split must be train or holdout"):
        open_source(f"playground:{SEEDS}?split=test")
    with pytest.raises(AheError, match="unknown option 'seed'"):
        open_source(f"playground:{SEEDS}?seed=1")
