"""What installing the project under test adds to its source tree, found once at make time.

tox and SWE-bench's per-repository specs install the project into its test environment
before its tests run. Its build backend may write files the package imports — hatch-vcs and
setuptools-scm write a version file (`src/humanize/_version.py`, imported by
`humanize/__init__.py`) — and the install gives it metadata (`importlib.metadata.version`,
entry points). AHE's tests import the code in /app (`src/` and the root on PYTHONPATH), so
what the agent edits is what is tested; what the install would add is found by building a
wheel of the tree once at make time (`pip wheel --no-deps`, the build dependencies from
pip's configured index, in a git checkout of the commit when there is one so the VCS
version is the real one) and written into the tree:

* every file the build created in the tree (build/, dist/, *.egg-info, .eggs and caches
  left out), e.g. the version file;
* the wheel's `<name>-<version>.dist-info/` (METADATA, entry_points.txt) next to the
  top-level package (in src/ or the root), unless the tree has metadata of its own there.

Nothing is fetched at rollout time: the files travel in the task. Results are cached per
commit (or per tree content) under the test environments' folder (`built/`). A build that
fails is not fatal: it is reported with pip's whole output and the tree is used as it is.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from ahe.tempdirs import temp_dir

BUILD_TIMEOUT_SEC = 900
MAX_FILE_BYTES = 1 << 20
_SKIP_DIRS = {"build", "dist", ".eggs", ".git", "__pycache__", ".pytest_cache", ".tox", ".nox", ".venv"}


class BuildFiles(BaseModel):
    """The files a project's build adds to its tree ({relative path: base64 content})."""

    files: dict[str, str] = Field(default_factory=dict)
    error: str | None = None  # why the build failed (with pip's whole output)
    seconds: float = 0.0
    reused: bool = False

    def texts(self) -> dict[str, str]:
        """The added files that are text (what a playground task can carry)."""
        out = {}
        for rel, b64 in self.files.items():
            try:
                out[rel] = base64.b64decode(b64).decode("utf-8")
            except UnicodeDecodeError:
                pass
        return out


def has_build(tree: Path) -> bool:
    """Whether tox would build and install the project: it has a pyproject [build-system]
    or a setup.py, and its tox test environment does not say skip_install / package = skip."""
    from ahe.tasks.sources.toxdeps import tox_env

    try:
        declared = "build-system" in tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        declared = False
    if not (declared or (tree / "setup.py").is_file()):
        return False
    return not tox_env(tree, sys.version_info[:2]).skip_install


def _listing(root: Path) -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info")]
        rel = Path(dirpath).relative_to(root)
        out.update((rel / f).as_posix() for f in filenames if not f.endswith((".pyc", ".pyo")))
    return out


def _cache_file(key: str) -> Path:
    from ahe.tasks.sources.testenv import env_root

    return env_root() / "built" / f"{hashlib.sha256(key.encode()).hexdigest()[:20]}.json"


def tree_key(tree: Path) -> str:
    """A key for a tree without a commit: the hash of its files' paths and contents."""
    h = hashlib.sha256()
    for rel in sorted(_listing(tree)):
        try:
            data = (tree / rel).read_bytes()
        except OSError:  # a dangling link, an unreadable file: its name still counts
            data = b""
        h.update(rel.encode() + b"\0" + data + b"\0")
    return "tree:" + h.hexdigest()


def build_files(tree: Path, *, key: str, prepare: Callable[[Path], None] | None = None, label: str = "the project",
                log: Callable[[str], None] = lambda s: None) -> BuildFiles:
    """Build a wheel of the project and return what the build and the install add to `tree`.

    `prepare(dest)` lays out the folder the build runs in (a git checkout of the commit);
    without it the build runs in a copy of `tree` with SETUPTOOLS_SCM_PRETEND_VERSION=0.0.0
    (hatch-vcs and setuptools-scm find no git history there)."""
    cached = _cache_file(key)
    try:
        return BuildFiles.model_validate_json(cached.read_text()).model_copy(update={"reused": True, "seconds": 0.0})
    except (OSError, ValueError):
        pass
    t0 = time.monotonic()
    log(f"building {label} (pip wheel; its build dependencies from pip's configured index) "
        "to find the files its build and install add")
    with temp_dir("build-files") as tmp:
        work, wheels = Path(tmp) / "src", Path(tmp) / "wheels"
        env = dict(os.environ)
        if prepare is not None:
            prepare(work)
        else:
            shutil.copytree(tree, work, symlinks=True, ignore=shutil.ignore_patterns(".git"))
            env.setdefault("SETUPTOOLS_SCM_PRETEND_VERSION", "0.0.0")
        before = _listing(work)
        error = _pip_wheel(work, wheels, env, label)
        if error:
            return BuildFiles(error=error, seconds=round(time.monotonic() - t0, 3))
        files = {rel: (work / rel).read_bytes() for rel in sorted(_listing(work) - before)
                 if not (tree / rel).exists() and (work / rel).is_file() and not (work / rel).is_symlink()
                 and (work / rel).stat().st_size <= MAX_FILE_BYTES}
        files.update(_metadata(tree, next(iter(sorted(wheels.glob("*.whl"))), None)))
    result = BuildFiles(files={k: base64.b64encode(v).decode() for k, v in files.items()},
                        seconds=round(time.monotonic() - t0, 3))
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(result.model_dump_json())
    return result


def _pip_wheel(work: Path, wheels: Path, env: dict[str, str], label: str) -> str | None:
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--ignore-requires-python", "--disable-pip-version-check",
           "-w", str(wheels), str(work)]
    try:
        proc = subprocess.run(cmd, cwd=work, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=BUILD_TIMEOUT_SEC)
    except subprocess.TimeoutExpired:
        return f"building {label} took longer than {BUILD_TIMEOUT_SEC} s"
    if proc.returncode != 0 or not list(wheels.glob("*.whl")):
        return f"building {label} (`pip wheel --no-deps .`) failed (exit {proc.returncode}); its whole output:\n" \
               f"{proc.stdout.rstrip()}"
    return None


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _metadata(tree: Path, wheel: Path | None) -> dict[str, bytes]:
    """The wheel's dist-info (METADATA, entry_points.txt) beside the top-level package."""
    if wheel is None:
        return {}
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = next((n.split("/")[0] for n in names if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)), None)
        if info is None:
            return {}
        tops = sorted({n.split("/")[0].removesuffix(".py") for n in names
                       if not n.split("/")[0].endswith((".dist-info", ".data")) and (n.endswith(".py") or "/" in n)})
        root = next((r for t in tops for r in ("src", "") if (tree / r / t).is_dir() or (tree / r / f"{t}.py").is_file()),
                    None)
        if root is None:
            return {}
        dist = _norm(info.split("-")[0])
        have = [p for p in (tree / root).iterdir() if p.name.endswith((".dist-info", ".egg-info"))
                and _norm(p.name.split("-")[0].removesuffix(".egg-info").removesuffix(".dist-info")) == dist]
        if have:
            return {}
        prefix = f"{root}/{info}" if root else info
        return {f"{prefix}/{leaf}": z.read(f"{info}/{leaf}") for leaf in ("METADATA", "entry_points.txt")
                if f"{info}/{leaf}" in names}


def add_to_tree(tree: Path, built: BuildFiles) -> list[str]:
    """Write the build's files into `tree` (never over a file of its own); the paths written."""
    written = []
    for rel, b64 in sorted(built.files.items()):
        path = tree / rel
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(b64))
        written.append(rel)
    return written


def git_checkout(repo: Path, sha: str) -> Callable[[Path], None]:
    """A `prepare` that checks the commit out in a local clone (the repository is untouched)."""

    def prepare(dest: Path) -> None:
        for cmd in (["git", "clone", "-q", "--shared", "--no-checkout", str(repo), str(dest)],
                    ["git", "-C", str(dest), "checkout", "-q", "--detach", sha]):
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                from ahe.errors import AheError

                raise AheError(f"--repo {repo}: `{' '.join(cmd[:3])} …` failed: {proc.stderr.strip()}")

    return prepare

