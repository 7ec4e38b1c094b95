"""constraints/known-good.txt (issue 34): the exact versions of a green run, for a user who needs a
set known to work. Every direct dependency of pyproject.toml (core and extras) is pinned there,
inside the range pyproject declares, so `pip install -e ".[dev]" -c constraints/known-good.txt`
cannot conflict with the package's own requirements."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints" / "known-good.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_every_direct_dependency_is_pinned_inside_its_declared_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    declared = [*project["dependencies"], *extras["dev"], *extras["ray"], *extras["mini"]]
    pins, problems = _pins(), []
    for text in declared:
        req = Requirement(text)
        version = pins.get(canonicalize_name(req.name))
        if version is None:
            problems.append(f"{req.name} is not pinned")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req.name}=={version} is outside pyproject's {req.specifier}")
    assert not problems, "constraints/known-good.txt: " + "; ".join(problems) + " (regenerate: python .ci/known_good.py)"


def test_each_package_is_pinned_once_and_exactly():
    lines = [x for x in (ROOT / "constraints" / "known-good.txt").read_text().splitlines() if x and not x.startswith("#")]
    names = [canonicalize_name(x.split("==")[0]) for x in lines]
    assert len(names) == len(set(names)) and all(x.count("==") == 1 for x in lines)
    assert {"openai", "pydantic", "typer"} <= set(names)
