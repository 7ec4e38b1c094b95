"""Where the files AHE ships beside its code live: the seed harness and the bundled examples.

In a source checkout (and an editable install) they are the repository's own folders
(`harness_workspace/`, `examples/`). A wheel carries copies under `ahe/_bundled/`, made at
build time by setup.py, because a wheel installs packages, not the folders next to them.
One lookup serves both, so no caller guesses a path relative to its own file.
"""

from __future__ import annotations

from pathlib import Path

from ahe.errors import AheError

PACKAGE = Path(__file__).resolve().parent
BUNDLED_DIR = PACKAGE / "_bundled"  # filled by setup.py's build step; absent in a checkout
BUNDLED = ("harness_workspace", "examples")  # the top-level folders a wheel carries


def bundled(relative: str) -> Path:
    """The shipped file or folder `relative` (e.g. "examples/tasks"), wherever this AHE came from."""
    for base in (BUNDLED_DIR, PACKAGE.parent):
        path = base / relative
        if path.exists():
            return path
    raise AheError(
        f"{relative}: not found beside the ahe package ({PACKAGE}); this install is incomplete — "
        "reinstall AHE (pip install --force-reinstall ahe) or run from a source checkout"
    )


def seed_workspace() -> Path:
    """The seed harness H0 (bash only)."""
    return bundled("harness_workspace")


def example_tasks() -> Path:
    """The bundled task suite (runs locally, no network)."""
    return bundled("examples/tasks")


def copy_bundled(dest: Path) -> list[Path]:
    """Copy the seed harness and the examples into `dest`, so the docs' relative paths
    (`harness_workspace`, `examples/tasks`, …) work there as they do in a checkout."""
    import shutil

    targets = [dest / name for name in BUNDLED]
    present = [str(t) for t in targets if t.exists()]
    if present:
        raise AheError(f"{', '.join(present)}: already exists; choose another folder or remove it first")
    dest.mkdir(parents=True, exist_ok=True)
    for name, target in zip(BUNDLED, targets):
        shutil.copytree(bundled(name), target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return targets
