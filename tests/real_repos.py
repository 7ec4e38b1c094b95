"""Real open-source libraries for the task-source tests, built from their released sdists.

tests/fixtures/real_repos/ holds the unmodified sdists from PyPI (each carries its own
licence file; see README.md there). `sdist_repo` turns a library's releases into a git
repository with one commit and one tag per release, which is what SWE-CI needs (a base and a
target commit); `playground_project` lays one release out as a playground project.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "real_repos"
_GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2000-01-01T00:00:00", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00",
            "PATH": "/usr/bin:/bin"}


def unpack(name: str, version: str, dest: Path) -> Path:
    """The sdist's top folder, extracted under `dest`."""
    with tarfile.open(FIXTURES / f"{name}-{version}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest / f"{name}-{version}"


def sdist_repo(tmp: Path, name: str, versions: list[str]) -> Path:
    """A git repository whose commits are the given releases, tagged v<version>."""
    repo = tmp / f"{name}-repo"
    repo.mkdir(parents=True)
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True, env=_GIT_ENV)  # noqa: E731
    git("init", "-q")
    for v in versions:
        for p in repo.iterdir():
            if p.name != ".git":
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
        src = unpack(name, v, tmp / "unpacked")
        for p in src.iterdir():
            shutil.move(str(p), repo / p.name)
        git("add", "-A")
        git("commit", "-q", "-m", f"{name} {v}")
        git("tag", f"v{v}")
    return repo


# playground.toml [[tasks]] of each library: (task name = its test file test_<name>.py, functions)
PLAYGROUND = {
    "cachetools": {
        "version": "5.2.0", "package_dir": "src/cachetools", "tests_dir": "tests",
        "description": "Extensible memoizing collections and decorators (cachetools, MIT).",
        "tasks": {
            "keys": ["keys.py:hashkey", "keys.py:methodkey", "keys.py:typedkey"],
            "cache": ["__init__.py:Cache.__getitem__", "__init__.py:Cache.__setitem__", "__init__.py:Cache.get",
                      "__init__.py:Cache.pop", "__init__.py:Cache.setdefault"],
            "lru": ["__init__.py:LRUCache.__getitem__", "__init__.py:LRUCache.popitem", "__init__.py:LRUCache.__update"],
            "fifo": ["__init__.py:FIFOCache.__setitem__", "__init__.py:FIFOCache.popitem"],
            "ttl": ["__init__.py:TTLCache.expire", "__init__.py:TTLCache.__getitem__", "__init__.py:TTLCache.__contains__"],
            "cached": ["__init__.py:cached"],
            "func": ["func.py:_cache", "func.py:lru_cache", "func.py:ttl_cache"],
        },
    },
    "isodate": {
        "version": "0.6.1", "package_dir": "src/isodate", "tests_dir": "src/isodate/tests",
        "empty_init": True,  # its tests/__init__.py imports isodate.tests, which the layout moves
        "description": "An ISO 8601 date, time and duration parser and formatter (isodate, BSD).",
        "tasks": {
            "time": ["isotime.py:parse_time", "isotime.py:time_isoformat", "isotzinfo.py:parse_tzinfo"],
            "date": ["isodates.py:parse_date", "isodates.py:date_isoformat"],
            "datetime": ["isodatetime.py:parse_datetime", "isodatetime.py:datetime_isoformat"],
            "duration": ["isoduration.py:parse_duration", "isoduration.py:duration_isoformat",
                         "duration.py:Duration.__add__", "duration.py:Duration.__sub__", "duration.py:fquotmod"],
            "strf": ["isostrf.py:strftime", "isostrf.py:_strfdt", "isostrf.py:_strfduration"],
        },
    },
    "iniconfig": {
        "version": "1.1.1", "package_dir": "src/iniconfig", "tests_dir": "testing",
        # its tests use `py.test.raises` (the undeclared test-only dependency py, and a pytest
        # that still lets py provide it): named in playground.toml
        "requirements": ["pytest<7.2", "py"],
        "description": "A small and simple INI-file parser (iniconfig, MIT).",
        "tasks": {
            "iniconfig": ["__init__.py:IniConfig._parseline", "__init__.py:IniConfig._parse", "__init__.py:IniConfig.get",
                          "__init__.py:SectionWrapper.get", "__init__.py:iscommentline"],
        },
    },
}
_META_FILES = ("setup.py", "setup.cfg", "pyproject.toml", "tox.ini", "LICENSE", "LICENCE", "LICENSE.txt")


def playground_project(tmp: Path, name: str) -> Path:
    """The library's release laid out as a playground project: <package>/, tests/test_<task>.py
    (and the test folder's helper files), its packaging files (for its declared dependencies
    and test runner) and its licence, plus a playground.toml naming the tasks."""
    spec = PLAYGROUND[name]
    src = unpack(name, spec["version"], tmp / "unpacked")
    root = tmp / f"{name}-project"
    shutil.copytree(src / spec["package_dir"], root / name,
                    ignore=shutil.ignore_patterns("tests", "__pycache__", "*.egg-info"))
    tests = src / spec["tests_dir"]
    (root / "tests").mkdir()
    for path in sorted(tests.glob("*.py")):
        if not path.name.startswith("test_") or path.stem[5:] in spec["tasks"]:
            shutil.copy2(path, root / "tests" / path.name)
    if spec.get("empty_init"):
        (root / "tests" / "__init__.py").write_text("")
    for meta in _META_FILES:
        if (src / meta).is_file():
            shutil.copy2(src / meta, root / meta)
    lines = ["[project]", f'name = "{name}"', f'description = "{spec["description"]}"', f'package = "{name}"']
    if "requirements" in spec:
        lines.append("requirements = [" + ", ".join(f'"{r}"' for r in spec["requirements"]) + "]")
    lines.append("")
    for task, funcs in spec["tasks"].items():
        lines += ["[[tasks]]", f'name = "{task}"', f'title = "{name} {task}"',
                  f'description = "Make the {task} tests of {name} pass."',
                  "functions = [" + ", ".join(f'"{name}/{f}"' for f in funcs) + "]", ""]
    (root / "playground.toml").write_text("\n".join(lines))
    return root
