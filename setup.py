"""Build step that pyproject.toml cannot express: a wheel carries the seed harness and the
bundled examples (top-level folders of the repository, not packages) under ahe/_bundled/,
where ahe.resources finds them. Everything else is declared in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

BUNDLED = ("harness_workspace", "examples")  # keep in step with ahe/resources.py


class BuildWithBundled(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads the checkout itself
            return
        target = Path(self.build_lib) / "ahe" / "_bundled"
        for name in BUNDLED:
            shutil.rmtree(target / name, ignore_errors=True)
            shutil.copytree(name, target / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithBundled})
