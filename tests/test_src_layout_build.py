"""SWE-CI and Playground on a src-layout project whose build writes its version file (issue 34).

A tiny library is written here with real git tags: `src/tinyunits/`, hatchling + hatch-vcs
(or setuptools + setuptools-scm) writing `src/tinyunits/_version.py` at build time (the package imports it), a test comparing
`__version__` with `importlib.metadata`, and a tox.ini whose factor-conditional lines name
packages that do not exist (installing them would fail). The build dependencies come from
pip's configured index at make time; the tests skip, saying so, when it cannot serve them.
The tox reader and a failing --setup command's whole output are checked offline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from ahe.errors import AheError
from ahe.tasks.sources.testenv import declared_requirements, ensure_env
from ahe.tasks.sources.toxdeps import expand_braces, filter_factors, pick_env, tox_env

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
_GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
            "GIT_AUTHOR_DATE": "2000-01-01T00:00:00", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00", "PATH": "/usr/bin:/bin"}

PYPROJECT = '''
[build-system]
requires = ["hatchling", "hatch-vcs"]
build-backend = "hatchling.build"

[project]
name = "tinyunits"
dynamic = ["version"]
optional-dependencies.check = ["packaging"]

[tool.hatch.version]
source = "vcs"

[tool.hatch.build.hooks.vcs]
version-file = "src/tinyunits/_version.py"
'''
SETUPTOOLS_SCM = PYPROJECT.replace('requires = ["hatchling", "hatch-vcs"]', 'requires = ["setuptools>=64", "setuptools-scm>=8"]') \
    .replace('"hatchling.build"', '"setuptools.build_meta"').split("[tool.hatch.version]")[0] \
    + '[tool.setuptools_scm]\nversion_file = "src/tinyunits/_version.py"\n'
# pick_env chooses py3<minor> of this Python; the other lines would install packages that do not exist
TOX = '''
[tox]
env_list = py27, py3{10,11,12,13,14}
[testenv]
extras = check
deps =
    py27: tinyunits-no-such-package-a==0.0.1
    !py310-!py311-!py312-!py313-!py314: tinyunits-no-such-package-b
commands = pytest {posargs}
'''
INIT = "from ._version import __version__\nfrom .convert import *  # noqa: F403\n"
CONVERT_1 = "def to_meters(feet):\n    return round(feet * 0.3048, 4)\n"
CONVERT_2 = CONVERT_1 + ("\n\ndef to_feet(meters):\n    return round(meters / 0.3048, 4)\n"
                         "\n\ndef to_inches(feet):\n    return feet * 12\n")
TESTS_1 = '''
import importlib.metadata

import pytest

import tinyunits


def test_the_version_is_the_installed_metadata():
    assert tinyunits.__version__ == importlib.metadata.version("tinyunits")


@pytest.mark.parametrize("feet, meters", [(0, 0), (1, 0.3048), (10, 3.048)])
def test_to_meters(feet, meters):
    assert tinyunits.to_meters(feet) == meters
'''
TESTS_2 = TESTS_1 + '''

@pytest.mark.parametrize("meters, feet", [(0, 0), (0.3048, 1), (3.048, 10)])
def test_to_feet(meters, feet):
    assert tinyunits.to_feet(meters) == feet


@pytest.mark.parametrize("feet, inches", [(0, 0), (1, 12), (2, 24)])
def test_to_inches(feet, inches):
    assert tinyunits.to_inches(feet) == inches
'''


def _release(repo: Path, convert: str, tests: str, tag: str, pyproject: str = PYPROJECT) -> None:
    files = {"pyproject.toml": pyproject, "tox.ini": TOX, "LICENSE": "MIT\n", "src/tinyunits/__init__.py": INIT,
             "src/tinyunits/convert.py": convert, "tests/test_convert.py": tests, ".gitignore": "_version.py\n"}
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    for cmd in (["add", "-A"], ["commit", "-q", "-m", tag], ["tag", tag]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, capture_output=True, env=_GIT_ENV)


def _repo(tmp: Path, pyproject: str) -> Path:
    """tinyunits v0.1.0 (to_meters) and v0.2.0 (to_feet, to_inches: 6 more tests)."""
    repo = tmp / "tinyunits"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=_GIT_ENV)
    _release(repo, CONVERT_1, TESTS_1, "v0.1.0", pyproject)
    _release(repo, CONVERT_2, TESTS_2, "v0.2.0", pyproject)
    return repo


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return _repo(tmp_path_factory.mktemp("src-layout"), PYPROJECT)


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> None:
    """Skip (with pip's reason) when pip's configured index cannot serve the build dependencies."""
    dest = tmp_path_factory.mktemp("index-probe")
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--disable-pip-version-check",
                           "-d", str(dest), "hatchling", "hatch-vcs", "setuptools", "setuptools-scm", "pytest",
                           "packaging"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.skip(f"pip's configured index cannot serve the build dependencies and pytest: {proc.stderr[-300:]}")


def ahe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ahe.cli", *args], capture_output=True, text=True, timeout=900,
                          env=dict(os.environ))


@needs_bwrap
@pytest.mark.parametrize("backend", ["hatch-vcs", "setuptools-scm"])
def test_swe_ci_tasks_of_a_src_layout_with_a_build_written_version_file(backend, index, tmp_path):
    repo = _repo(tmp_path, PYPROJECT if backend == "hatch-vcs" else SETUPTOOLS_SCM)
    out = tmp_path / "tasks"
    proc = ahe("tasks", "make", "swe-ci", "--json", "--repo", str(repo), "--base", "v0.1.0", "--target", "v0.2.0",
               "--min-gap", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    [row] = json.loads(proc.stdout)
    assert row["kept"] and (row["n_base"], row["n_target"], row["gap"]) == (4, 10, 6), row
    task = Path(row["path"])
    # each tree carries its own build's version file and metadata; the oracle brings the target's
    assert "'0.1.0'" in (task / "environment/src/tinyunits/_version.py").read_text()
    assert "'0.2.0'" in (task / "solution/files/src/tinyunits/_version.py").read_text()
    assert (task / "environment/src/tinyunits-0.1.0.dist-info/METADATA").is_file()
    meta = tomllib.loads((task / "task.toml").read_text())["metadata"]
    assert sorted(meta["build_added"]) == ["src/tinyunits-0.2.0.dist-info/METADATA", "src/tinyunits/_version.py"]
    # tox's extras (check) are in, its factor lines for other Pythons are not
    assert meta["test_env_requirements"] == ["packaging", "pytest"]
    check = ahe("tasks", "check", str(out), "--json")
    assert check.returncode == 0, check.stdout + check.stderr
    [result] = json.loads(check.stdout)["tasks"]
    assert result["oracle"]["reward"] == 1.0 and result["nop"]["reward"] == 0.0

    # without installing the project the package cannot even be imported: the failure
    proc = ahe("tasks", "make", "swe-ci", "--json", "--repo", str(repo), "--base", "v0.1.0", "--target", "v0.2.0",
               "--min-gap", "3", "--out", str(tmp_path / "bare"), "--no-install-project")
    [bare] = json.loads(proc.stdout)
    assert not bare["kept"] and "No module named 'tinyunits._version'" in bare["reason"]


@needs_bwrap
def test_playground_derives_a_src_layout_project_with_its_build_files(repo, index, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    archive = subprocess.run(["git", "archive", "v0.2.0"], cwd=repo, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(project)], input=archive, check=True)
    (project / "playground.toml").write_text(textwrap.dedent('''
        [project]
        name = "tinyunits"
        description = "Unit conversions in a src layout with a build-written version file."
        package = "tinyunits"

        [[tasks]]
        name = "convert"
        title = "Conversions"
        description = "feet, meters and inches"
        functions = ["src/tinyunits/convert.py:to_meters", "src/tinyunits/convert.py:to_feet",
                     "src/tinyunits/convert.py:to_inches"]
    '''))
    out = tmp_path / "tasks"
    proc = ahe("tasks", "derive", "--project", str(project), "--out", str(out), "--max-fix", "2", "--max-reproduce", "1")
    assert proc.returncode == 0, proc.stderr
    assert "the build adds src/tinyunits-0.0.0.dist-info/METADATA, src/tinyunits/_version.py" in " ".join(proc.stderr.split())
    kinds = sorted(t["kind"] for t in json.loads((out / "derive.json").read_text())["tasks"])
    assert {"implement", "library", "fix"} <= set(kinds), kinds
    grade = json.loads((out / "tinyunits-implement-convert/tests/grade.json").read_text())
    assert grade["package"] == "src/tinyunits" and grade["also"] == ["src/tinyunits-0.0.0.dist-info/METADATA"]
    assert (out / "tinyunits-implement-convert/environment/src/tinyunits/_version.py").is_file()
    check = ahe("tasks", "check", str(out), "--json")
    rows = json.loads(check.stdout)["tasks"]
    assert check.returncode == 0 and all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]
    assert all(r["nop"]["reward"] < 1 for r in rows)


def test_tox_factor_conditional_lines_extras_and_requirement_files(tmp_path):
    assert expand_braces("py{310,311}-cov") == ["py310-cov", "py311-cov"]
    assert pick_env(["lint", "py310-django", "py311-django", "py311"], (3, 11)) == "py311-django"
    assert pick_env(["docs", "py3"], (3, 11)) == "py3" and pick_env(["docs"], (3, 11)) == "py311"
    lines = "pytest\npy311: mock\n!py311: trio\npy310,py311: attrs\npy311-cov: coverage\npy{310,311}-!cov: six\n" \
            "requests; python_version < '3.9'\n# a comment"
    assert filter_factors(lines, {"py311"}) == ["pytest", "mock", "attrs", "six", "requests; python_version < '3.9'"]
    assert filter_factors(lines, {"py311", "cov"}) == ["pytest", "mock", "attrs", "coverage",
                                                        "requests; python_version < '3.9'"]
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "test.txt").write_text("hypothesis  # property tests\n-c constraints.txt\n")
    (tmp_path / "tox.ini").write_text(textwrap.dedent('''
        [tox]
        envlist = py{310,311}-{fast,slow}, docs
        [testenv]
        extras =
            slow: heavy
            fast: speedy
        deps =
            -r{toxinidir}/requirements/test.txt
            .[extra1]
            py27: funcsigs
            slow: pytest-timeout
        [testenv:docs]
        skip_install = true
    '''))
    env = tox_env(tmp_path, (3, 11))
    assert env.name == "py311-fast" and env.deps == ["hypothesis"] and env.extras == ["speedy", "extra1"]
    assert not env.skip_install
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "me"\n[project.optional-dependencies]\n'
                                             'speedy = ["ujson"]\nextra1 = ["me[test]"]\ntest = ["pytest-mock"]\n')
    assert declared_requirements(tmp_path, python_version=(3, 11)) == ["pytest-mock", "ujson", "hypothesis"]


def test_a_failing_setup_command_reports_its_whole_output(tmp_path, monkeypatch):
    monkeypatch.setenv("AHE_TEST_ENV_DIR", str(tmp_path / "envs"))
    setup = 'for i in $(seq 1 40); do echo "step $i"; done; echo "the real reason" >&2; exit 3'
    with pytest.raises(AheError) as err:
        ensure_env([], setup=setup, source_dir=tmp_path)
    text = str(err.value)
    assert "failed (exit 3); its whole output:" in text
    assert all(f"step {i}\n" in text for i in range(1, 41)) and text.endswith("the real reason")


BACKEND = '''
import os, zipfile
FAIL = False


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if FAIL:
        print("the backend's own reason, line 1")
        raise SystemExit("the backend's own reason, last line")
    with open("src/inpkg/_version.py", "w") as f:  # what hatch-vcs and setuptools-scm do
        f.write("__version__ = '1.2.3'\\n")
    name = "inpkg-1.2.3-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        z.writestr("inpkg/__init__.py", "")
        z.writestr("inpkg-1.2.3.dist-info/METADATA", "Metadata-Version: 2.1\\nName: inpkg\\nVersion: 1.2.3\\n")
        z.writestr("inpkg-1.2.3.dist-info/entry_points.txt", "[console_scripts]\\ninpkg = inpkg:main\\n")
        z.writestr("inpkg-1.2.3.dist-info/WHEEL", "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
        z.writestr("inpkg-1.2.3.dist-info/RECORD", "")
    return name
'''


def _in_tree_backend_project(root: Path, fail: bool) -> Path:
    (root / "src" / "inpkg").mkdir(parents=True)
    (root / "src" / "inpkg" / "__init__.py").write_text("from ._version import __version__\n")
    (root / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
                                         '[project]\nname = "inpkg"\nversion = "1.2.3"\n')
    (root / "backend.py").write_text(BACKEND.replace("FAIL = False", f"FAIL = {fail}"))
    return root


def test_the_build_adds_its_version_file_and_metadata_and_a_failure_is_reported_whole(tmp_path, monkeypatch):
    """Offline (PIP_NO_INDEX, an in-tree build backend that needs no package)."""
    from ahe.tasks.sources.buildfiles import add_to_tree, build_files, has_build

    monkeypatch.setenv("AHE_TEST_ENV_DIR", str(tmp_path / "envs"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    tree = _in_tree_backend_project(tmp_path / "ok", fail=False)
    assert has_build(tree) and not has_build(tmp_path)
    built = build_files(tree, key="tree:ok")
    assert built.error is None and sorted(built.files) == [
        "src/inpkg-1.2.3.dist-info/METADATA", "src/inpkg-1.2.3.dist-info/entry_points.txt", "src/inpkg/_version.py"]
    assert not (tree / "src/inpkg/_version.py").exists()  # the build ran in a copy
    assert add_to_tree(tree, built) == sorted(built.files)
    assert (tree / "src/inpkg/_version.py").read_text() == "__version__ = '1.2.3'\n"
    assert build_files(tree, key="tree:ok").reused  # once per commit or tree

    broken = _in_tree_backend_project(tmp_path / "broken", fail=True)
    failed = build_files(broken, key="tree:broken")
    assert failed.files == {} and "its whole output:" in failed.error
    assert "the backend's own reason, line 1" in failed.error and "the backend's own reason, last line" in failed.error
