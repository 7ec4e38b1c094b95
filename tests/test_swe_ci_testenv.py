"""The test environment of a repository (ahe/tasks/sources/testenv.py): what a project declares,
made once per requirement set, a --setup command run in it, reused by the next task, mounted
read-only at /opt/ahe-env in the local sandbox."""

from __future__ import annotations

import asyncio
import shutil
import textwrap
from pathlib import Path

import pytest

from ahe.tasks.sources.testenv import INFO_FILE, declared_requirements, ensure_env, load_env


def test_declared_requirements_come_from_every_packaging_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent('''
        [project]
        name = "mylib"
        dependencies = ["attrs>=21", "mylib-extra; python_version<'3.8'"]
        [project.optional-dependencies]
        test = ["hypothesis"]
        docs = ["sphinx"]
    '''))
    (tmp_path / "setup.cfg").write_text("[options]\ninstall_requires =\n    six\n[options.extras_require]\ntesting =\n    mock\n")
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='mylib', tests_require=['freezegun'], "
                                       "install_requires=['MyLib', 'packaging'])\n")
    (tmp_path / "tox.ini").write_text("[testenv]\ndeps =\n    pytest-mock\n    -rrequirements.txt\n    {toxinidir}\n")
    (tmp_path / "requirements-test.txt").write_text("# test tools\ncoverage  # measure\n-e .\n")
    reqs = declared_requirements(tmp_path, pytest=True)
    assert reqs == ["attrs>=21", "mylib-extra; python_version<'3.8'", "hypothesis", "six", "mock", "freezegun",
                    "packaging", "coverage", "pytest-mock", "pytest"]  # never the project itself, never docs
    assert declared_requirements(tmp_path / "nothing") == []


def test_an_environment_is_made_once_with_its_setup_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("AHE_TEST_ENV_DIR", str(tmp_path / "envs"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "marker.py").write_text("VALUE = 42\n")
    setup = 'cp marker.py "$(python -c "import sysconfig; print(sysconfig.get_paths()[\'purelib\'])")/"'
    first = ensure_env([], setup=setup, source_dir=src)
    assert not first.reused and first.setup == setup and (first.path / INFO_FILE).is_file()
    assert list(first.path.glob("lib/python*/site-packages/marker.py"))
    again = ensure_env([], setup=setup, source_dir=src)
    assert again.reused and again.path == first.path and again.seconds < 1.0
    assert load_env(first.path).python_version == first.python_version
    other = ensure_env([], setup="true", source_dir=src)  # another setup: another environment
    assert other.path != first.path


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_the_local_sandbox_mounts_a_tasks_environment_read_only(tmp_path, monkeypatch):
    from ahe.tasks.loader import load_task
    from ahe.tasks.sandboxes import make_local_sandbox

    monkeypatch.setenv("AHE_TEST_ENV_DIR", str(tmp_path / "envs"))
    env = ensure_env([], setup="true")
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "instruction.md").write_text("x\n")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\n")
    (task / "task.toml").write_text(f'[task]\nname = "t"\n\n[environment]\ntest_env = "{env.path}"\n')
    loaded = load_task(task)
    assert loaded.environment.test_env == env.path

    async def probe() -> tuple[str, int]:
        box = make_local_sandbox(loaded, tmp_path / "work")
        await box.start()
        try:
            ran = await box.exec("/opt/ahe-env/bin/python -c 'import sys; print(sys.prefix)'", timeout=60)
            wrote = await box.exec("touch /opt/ahe-env/x", timeout=60)
            return ran.stdout.strip(), wrote.exit_code
        finally:
            await box.stop()

    prefix, touched = asyncio.run(probe())
    assert prefix == "/opt/ahe-env" and touched != 0  # its interpreter runs; it cannot be written
    shutil.rmtree(env.path)
    from ahe.errors import AheError

    with pytest.raises(AheError, match="test_env .* does not exist on this machine"):
        make_local_sandbox(load_task(task), tmp_path / "work2")
