"""Run a project's unit tests on variants of its code, inside one local sandbox.

Derivation and the generator's checks never run project code on the host: each variant is a
folder under the sandbox's /app (the package, possibly changed, and a set of test files),
and `grade.py run` reports every test's outcome as JSON. A variant that hangs past the
timeout comes back as `timed_out` with no outcomes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
from pathlib import Path

from pydantic import BaseModel, Field

from ahe.tempdirs import make_temp_dir

GRADER = Path(__file__).with_name("grade.py")
RUN_TIMEOUT_SEC = 60.0


class RunResult(BaseModel):
    """Outcome of one test run: {test id: pass | fail | error | skip}."""

    tests: dict[str, str] = Field(default_factory=dict)
    messages: dict[str, str] = Field(default_factory=dict)
    timed_out: bool = False
    crashed: str | None = None

    def failing(self) -> list[str]:
        return sorted(t for t, v in self.tests.items() if v in ("fail", "error"))

    def passing(self) -> list[str]:
        return sorted(t for t, v in self.tests.items() if v == "pass")

    @property
    def all_pass(self) -> bool:
        return bool(self.tests) and not self.failing() and not self.timed_out and not self.crashed


class SandboxRunner:
    """One started local sandbox whose /app is a scratch folder of variants."""

    def __init__(self, *, concurrency: int = 2, timeout: float = RUN_TIMEOUT_SEC, isolation: str = "auto",
                 test_env: Path | None = None, test_runner: str = "unittest") -> None:
        self.timeout = timeout
        self.test_env = test_env  # mounted read-only at /opt/ahe-env; its python runs the tests
        self.test_runner = test_runner
        self._isolation = isolation
        self._sem = asyncio.Semaphore(max(1, concurrency))
        self._ids = itertools.count(1)
        self._scratch: Path | None = None
        self._sandbox = None
        self.runs = 0

    async def __aenter__(self) -> "SandboxRunner":
        from ahe.sandbox.local import LocalSandbox

        self._scratch = make_temp_dir("playground")
        app = self._scratch / "app"
        app.mkdir()
        shutil.copy2(GRADER, app / "grade.py")
        from ahe.sandbox.base import Mount
        from ahe.sandbox.builtin_backends import TEST_ENV_MOUNT

        mounts = [Mount(source=self.test_env, target=TEST_ENV_MOUNT, writable=False)] if self.test_env else []
        self._sandbox = LocalSandbox(app, root_dir=self._scratch / "root", isolation=self._isolation,  # type: ignore[arg-type]
                                     mounts=mounts)
        self._python = f"{TEST_ENV_MOUNT}/bin/python" if self.test_env else "python3"
        await self._sandbox.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self._sandbox is not None:
                await self._sandbox.stop()
        finally:
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)

    def describe(self) -> str:
        env = f", test environment {self.test_env}" if self.test_env else ""
        return f"{self.test_runner}{env}"

    async def import_error(self, files: dict[str, str]) -> str | None:
        """Import every module of a package given as {relative path: text}; the last line of
        the first error, or None when they all import."""
        assert self._scratch is not None and self._sandbox is not None, "use `async with SandboxRunner()`"
        name = f"i{next(self._ids):04d}"
        root = self._scratch / "app" / name
        modules = []
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
            if rel.endswith(".py"):
                modules.append(rel.removeprefix("src/")[:-3].removesuffix("/__init__").replace("/", "."))
        code = f"import importlib\nfor m in {sorted(modules)!r}:\n    importlib.import_module(m)\n"
        (root / "ahe_imports.py").write_text(code)
        try:
            async with self._sem:
                res = await self._sandbox.exec(f"cd {name} && {self._python} -B ahe_imports.py", timeout=self.timeout,
                                               env={"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": "src"})
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if res.exit_code == 0 and not res.timed_out:
            return None
        lines = [ln for ln in (res.stderr or res.stdout or "").splitlines() if ln.strip()]
        return (lines[-1].strip() if lines else f"exit code {res.exit_code}")[:200]

    async def run(self, files: dict[str, str]) -> RunResult:
        """Run the tests of a tree given as {relative path: text} (package and tests/)."""
        assert self._scratch is not None and self._sandbox is not None, "use `async with SandboxRunner()`"
        name = f"v{next(self._ids):04d}"
        root = self._scratch / "app" / name
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        (root / "tests").mkdir(parents=True, exist_ok=True)
        (root / "tests" / "__init__.py").touch()
        async with self._sem:
            self.runs += 1
            res = await self._sandbox.exec(f"{self._python} -B grade.py run {name} {name}.json {self.test_runner}",
                                           timeout=self.timeout, env={"PYTHONDONTWRITEBYTECODE": "1"})
        out = self._scratch / "app" / f"{name}.json"
        try:
            if res.timed_out:
                return RunResult(timed_out=True)
            if not out.is_file():
                return RunResult(crashed=(res.stderr or res.stdout or f"exit code {res.exit_code}")[-500:])
            data = json.loads(out.read_text())
            return RunResult(tests=data.get("tests", {}), messages=data.get("messages", {}))
        finally:
            shutil.rmtree(root, ignore_errors=True)
            out.unlink(missing_ok=True)
