"""Write constraints/known-good.txt: the exact versions of everything `pip install -e ".[dev,ray,mini]"`
pulls in, as installed in the running venv (run it in the venv of a green CI run):

    python .ci/known_good.py > constraints/known-good.txt

A user who needs a set known to work installs with `pip install -e ".[dev]" -c constraints/known-good.txt`
(issue 34). The closure is walked through the installed distributions' own metadata, markers
evaluated for this machine, so the file names each package once, at the version that ran.
"""

from __future__ import annotations

import sys
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

EXTRAS = ("dev", "ray", "mini")


def closure(root: str, extras: tuple[str, ...]) -> dict[str, str]:
    found: dict[str, str] = {}
    todo: list[tuple[str, tuple[str, ...]]] = [(root, extras)]
    while todo:
        name, wanted = todo.pop()
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency this machine did not install
        key = canonicalize_name(dist.metadata["Name"])
        first = key not in found
        found[key] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            envs = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is not None and not any(req.marker.evaluate(env) for env in envs):
                continue
            if first or req.marker is not None:
                todo.append((req.name, tuple(sorted(req.extras))))
    found.pop(canonicalize_name(root), None)
    return found


def main() -> None:
    pins = closure("ahe", EXTRAS)
    print(f"# exact versions of a green run (Python {sys.version.split()[0]}); regenerate: python .ci/known_good.py")
    print("\n".join(f"{name}=={version}" for name, version in sorted(pins.items())))


if __name__ == "__main__":
    main()
