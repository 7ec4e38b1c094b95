"""Print a pip constraints file pinning every direct dependency of pyproject.toml (the core and
the extras named on the command line) at its declared lower bound: `pip install -e ".[dev]" -c
FILE` then installs the lowest versions we claim to support, with the newest of everything they
pull in (what `uv pip compile --resolution lowest-direct` does, without needing uv).

    python .ci/lowest-constraints.py dev > lowest.txt

Fails, naming it, on a dependency without a `>=` lower bound: every direct dependency needs one
that CI actually installs (issue 34).
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)$")


def lower_bound(requirement: str) -> str:
    name, _extras, spec = REQUIREMENT.match(requirement.split(";")[0]).groups()
    found = re.search(r">=\s*([0-9][0-9A-Za-z.]*)", spec)
    if not found:
        sys.exit(f"pyproject.toml: dependency {requirement!r} has no '>=' lower bound; give it one that CI installs")
    return f"{name}=={found.group(1)}"


def main(extras: list[str]) -> None:
    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        if extra not in project.get("optional-dependencies", {}):
            sys.exit(f"pyproject.toml: no extra named {extra!r}")
        requirements += project["optional-dependencies"][extra]
    print("\n".join(sorted({lower_bound(r) for r in requirements}, key=str.lower)))


if __name__ == "__main__":
    main(sys.argv[1:])
