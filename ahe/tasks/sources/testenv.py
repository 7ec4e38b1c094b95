"""A repository's test environment: the interpreter and packages its tests need.

Real projects' tests need pytest and their dependencies, which the sandbox's `python3` does
not have. AHE makes one virtualenv per set of requirements (+ setup command), from the
project's declared dependencies (`declared_requirements`) or a `--setup` command, with the
same Python the jail runs, and keeps it in a cache folder (`AHE_TEST_ENV_DIR`, default
`~/.cache/ahe/test-envs/<key>`). The local sandbox mounts it read-only at `MOUNT`; verifiers
use `MOUNT/bin/python` when it is there. A task records the folder (`[environment] test_env`)
and the exact versions (`[metadata] test_env_frozen`). A second task of the same repository
finds the folder made and pays nothing. Packages come from pip's configured index (on an
offline machine: whatever the local index serves).
"""

from __future__ import annotations

import ast
import configparser
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from pydantic import BaseModel, Field

from ahe.errors import AheError

MOUNT = "/opt/ahe-env"
INFO_FILE = "ahe-env.json"
_EXTRAS = ("test", "tests", "testing", "dev")
_REQ_FILES = ("requirements.txt", "requirements-test.txt", "requirements_test.txt", "test-requirements.txt",
              "requirements-dev.txt", "dev-requirements.txt", "requirements/test.txt", "requirements/tests.txt",
              "tests/requirements.txt")
PIP_TIMEOUT_SEC = 900


class TestEnv(BaseModel):
    """A made test environment (what ahe-env.json in its folder holds)."""

    __test__ = False  # not a pytest class
    path: Path
    python: str  # the interpreter it was made from, e.g. /usr/bin/python3
    python_version: str
    requirements: list[str] = Field(default_factory=list)
    setup: str | None = None
    frozen: list[str] = Field(default_factory=list)  # `pip freeze`: the exact versions
    seconds: float = 0.0  # how long making it took (0 when it was already there)
    reused: bool = False


def env_root() -> Path:
    return Path(os.environ.get("AHE_TEST_ENV_DIR") or Path.home() / ".cache" / "ahe" / "test-envs")


def jail_python() -> str:
    from ahe.sandbox.bwrap import jail_python as _jail_python

    return _jail_python()[0]


# ---------------------------------------------------------------------------- declared deps


def _clean(reqs: list[str], own_name: str | None) -> list[str]:
    out: list[str] = []
    own = _norm(own_name) if own_name else None
    for r in reqs:
        r = r.split("#", 1)[0].strip()
        if not r or r.startswith(("-", ".", "{", "/")) or "{" in r or "://" in r:
            continue
        name = _norm(re.split(r"[\s<>=!~;\[(@]", r, maxsplit=1)[0])
        if name and name != own and r not in out:
            out.append(r)
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pyproject(root: Path) -> tuple[list[str], dict[str, list[str]], str | None]:
    try:
        data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return [], {}, None
    project = data.get("project") or {}
    reqs = [r for r in project.get("dependencies") or [] if isinstance(r, str)]
    extras: dict[str, list[str]] = {}
    for table in (project.get("optional-dependencies") or {}, data.get("dependency-groups") or {}):
        for extra, items in table.items():
            extras.setdefault(_norm(extra), []).extend(r for r in items or [] if isinstance(r, str))
    return reqs, extras, project.get("name")


def _setup_cfg(root: Path) -> tuple[list[str], dict[str, list[str]], str | None]:
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read(root / "setup.cfg", encoding="utf-8")
    except configparser.Error:
        return [], {}, None
    lines = lambda sec, key: cfg.get(sec, key, fallback="").splitlines()  # noqa: E731
    reqs = lines("options", "install_requires") + lines("options", "tests_require")
    extras = {_norm(k): lines("options.extras_require", k) for k in
              (cfg.options("options.extras_require") if cfg.has_section("options.extras_require") else [])}
    return reqs, extras, cfg.get("metadata", "name", fallback=None)


def _setup_py(root: Path) -> tuple[list[str], dict[str, list[str]], str | None]:
    """install_requires / tests_require / extras written as literals in setup(...)."""
    try:
        tree = ast.parse((root / "setup.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return [], {}, None
    reqs: list[str] = []
    extras: dict[str, list[str]] = {}
    name = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for kw in node.keywords:
            try:
                value = ast.literal_eval(kw.value)
            except ValueError:
                continue
            if kw.arg in ("install_requires", "tests_require") and isinstance(value, (list, tuple)):
                reqs += [v for v in value if isinstance(v, str)]
            elif kw.arg == "extras_require" and isinstance(value, dict):
                for extra, items in value.items():
                    if isinstance(extra, str) and isinstance(items, (list, tuple)):
                        extras.setdefault(_norm(extra), []).extend(v for v in items if isinstance(v, str))
            elif kw.arg == "name" and isinstance(value, str):
                name = value
    return reqs, extras, name


def declared_requirements(root: Path, *, pytest: bool = False, python_version: tuple[int, int] | None = None) -> list[str]:
    """The project's runtime and test dependencies as it declares them (pyproject.toml,
    setup.cfg, setup.py, requirements files) and as tox reads them for this Python (its test
    environment's factor-conditional deps and extras, `-r` files; see toxdeps.py); pytest
    added when its tests are pytest tests. The project itself is never in the list."""
    from ahe.tasks.sources.toxdeps import tox_env

    tox = tox_env(root, python_version or sys.version_info[:2])
    reqs: list[str] = []
    own: str | None = None
    wanted = list(dict.fromkeys([*_EXTRAS, *(_norm(e) for e in tox.extras)]))
    for reader in (_pyproject, _setup_cfg, _setup_py):
        found, extras, name = reader(root)
        own = own or name
        reqs += found
        for extra in wanted:
            reqs += _self_extras(extras.get(extra, []), extras, own)
    for rel in _REQ_FILES:
        try:
            reqs += (root / rel).read_text(encoding="utf-8").splitlines()
        except OSError:
            pass
    reqs += tox.deps
    out = _clean(reqs, own)
    if pytest and not any(_norm(re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0]) == "pytest" for r in out):
        out.append("pytest")
    return out


def _self_extras(items: list[str], extras: dict[str, list[str]], own: str | None) -> list[str]:
    """An extra's requirements, with `own[a,b]` (an extra naming others) expanded one level."""
    out = []
    for r in items:
        m = re.match(r"^\s*([\w.-]+)\s*\[([^\]]+)\]\s*$", r)
        if own and m and _norm(m.group(1)) == _norm(own):
            out += [x for e in m.group(2).split(",") for x in extras.get(_norm(e.strip()), [])]
        else:
            out.append(r)
    return out


# ---------------------------------------------------------------------------- making it


def env_key(python: str, requirements: list[str], setup: str | None) -> str:
    version = _python_version(python)
    blob = json.dumps({"python": python, "version": version, "requirements": sorted(requirements),
                       "setup": setup or ""}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _python_version(python: str) -> str:
    try:
        out = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise AheError(f"cannot run {python} to make a test environment ({exc.strerror}).") from None
    return out.stdout.strip()


def load_env(path: Path) -> TestEnv | None:
    try:
        return TestEnv.model_validate_json((path / INFO_FILE).read_text())
    except (OSError, ValueError):
        return None


def ensure_env(requirements: list[str], *, setup: str | None = None, source_dir: Path | None = None,
               python: str | None = None, log=lambda s: None) -> TestEnv:
    """The test environment for these requirements (+ setup command), made once and reused."""
    python = python or jail_python()
    t0 = time.monotonic()
    key = env_key(python, requirements, setup)
    root = env_root()
    root.mkdir(parents=True, exist_ok=True)
    final = root / key
    with open(root / f"{key}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = load_env(final)
        if made is not None:
            return made.model_copy(update={"seconds": round(time.monotonic() - t0, 3), "reused": True})
        shutil.rmtree(final, ignore_errors=True)  # a half-made one from a killed run
        log(f"making the test environment {final} ({', '.join(requirements) or 'no requirements'}"
            f"{'; setup: ' + setup if setup else ''})")
        tmp = root / f"{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            env = _build(tmp, python, requirements, setup, source_dir)
            tmp.rename(final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        env = env.model_copy(update={"path": final, "seconds": round(time.monotonic() - t0, 3)})
        (final / INFO_FILE).write_text(env.model_dump_json(indent=1))
        return env


def _run(cmd: list[str], what: str, *, whole: bool = False, **kw) -> str:
    """Run a command; its failure is an AheError with pip's last lines, or (`whole`) the
    command's whole output, stdout and stderr interleaved as it wrote them."""
    try:
        proc = subprocess.run(cmd, text=True, timeout=PIP_TIMEOUT_SEC, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT if whole else subprocess.PIPE, **kw)
    except subprocess.TimeoutExpired:
        raise AheError(f"{what} took longer than {PIP_TIMEOUT_SEC} s; check the package index pip uses.") from None
    if proc.returncode != 0:
        if whole:
            raise AheError(f"{what} failed (exit {proc.returncode}); its whole output:\n{proc.stdout.rstrip()}")
        tail = " ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])[-600:]
        raise AheError(f"{what} failed (exit {proc.returncode}): {tail}")
    return proc.stdout


def _build(tmp: Path, python: str, requirements: list[str], setup: str | None, source_dir: Path | None) -> TestEnv:
    _run([python, "-m", "venv", "--without-pip", str(tmp)], f"making a virtualenv with {python}")
    venv_py = tmp / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(venv_py), "--disable-pip-version-check"]
    # `pip` inside the environment (for --setup commands): the host's pip aimed at this venv
    (tmp / "bin" / "pip").write_text(f'#!/bin/sh\nexec {sys.executable} -m pip --python "$(dirname "$0")/python" "$@"\n')
    (tmp / "bin" / "pip").chmod(0o755)
    if requirements:
        _run([*pip, "install", "-q", *requirements],
             f"installing the test requirements {', '.join(requirements)} (pip's configured index)")
    if setup:
        env = {**os.environ, "VIRTUAL_ENV": str(tmp), "PATH": f"{tmp / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
        _run(["bash", "-c", setup], f"the setup command {setup!r} (run in {source_dir or tmp})", whole=True,
             cwd=source_dir or tmp, env=env)
    frozen = [ln for ln in _run([*pip, "freeze"], "pip freeze").splitlines() if ln.strip()]
    return TestEnv(path=tmp, python=python, python_version=_python_version(python), requirements=requirements,
                   setup=setup, frozen=frozen)
