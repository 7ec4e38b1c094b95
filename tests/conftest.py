"""Shared fixtures: the scripted model server over real HTTP, and throwaway workspaces."""

from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
SEED = REPO / "harness_workspace"

# Rich sizes its tables to COLUMNS when not on a terminal: tests that read `ahe`'s tables would
# pass or fail with the width of whatever terminal ran them (issue 34). Every test process, and
# every `ahe` it starts, sees the same wide terminal; tests of narrow widths set their own
# (tests/test_tables.py sweeps 60–200).
os.environ["COLUMNS"] = "200"


def pytest_configure(config: pytest.Config) -> None:
    """Give the whole run (workers and every subprocess) a private TMPDIR, so leftovers can be seen.

    Machine-wide lock files stay in the real temporary folder (AHE_LOCK_DIR): concurrent runs
    must share them."""
    if hasattr(config, "workerinput") or os.environ.get("AHE_TEST_TMPDIR"):
        if os.environ.get("AHE_TEST_TMPDIR"):  # a test process: its own leaks must never be swept away
            with open(Path(os.environ["AHE_TEST_TMPDIR"]) / "pytest-of-test-pids", "a") as f:
                f.write(f"{os.getpid()}\n")
        return
    real = tempfile.gettempdir()
    private = tempfile.mkdtemp(prefix="ahe-test-session-", dir=real)
    os.environ.update(AHE_TEST_TMPDIR=private, TMPDIR=private, AHE_LOCK_DIR=os.environ.get("AHE_LOCK_DIR", real))
    tempfile.tempdir = None
    config._ahe_private_tmp = private  # type: ignore[attr-defined]


def remove_temp_folders_of(pid: int) -> None:
    """What a process the test SIGKILLed on purpose left in TMPDIR (it could not clean up; the
    next `ahe` would sweep it, but only once it is older than ahe.tempdirs.MIN_AGE_SEC)."""
    import tempfile

    for folder in Path(tempfile.gettempdir()).glob(f"ahe-*-{pid}-*"):
        shutil.rmtree(folder, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when anything but pytest's own tmp_path folders is left in the private TMPDIR."""
    private = getattr(session.config, "_ahe_private_tmp", None)
    if private is None:
        return
    from ahe.tempdirs import sweep_stale

    pids_file = Path(private) / "pytest-of-test-pids"
    test_pids = frozenset(int(x) for x in pids_file.read_text().split()) if pids_file.exists() else frozenset()
    # what the next `ahe` command would remove: folders of AHE processes the tests killed outright
    sweep_stale(Path(private), keep_pids=test_pids | {os.getpid()})
    left = sorted(p.name for p in Path(private).iterdir() if not p.name.startswith("pytest-of-"))
    shutil.rmtree(private, ignore_errors=True)
    if left:
        shown = ", ".join(left[:20]) + (f" … ({len(left)} in all)" if len(left) > 20 else "")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        reporter.write_line(
            f"FAILED: the tests left temporary folders behind (AHE must remove what it makes): {shown}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def mock_llm() -> Iterator[Callable[..., Any]]:
    """Start a MockLLMServer for a policy dict; returns an object with .url, .server, .client()."""
    from ahe.llm import make_client
    from ahe.llm.types import RoleConfig
    from ahe.testing import MockLLMServer, Policy

    servers = []

    class Handle:
        def __init__(self, policy: dict) -> None:
            self.server = MockLLMServer(Policy.from_dict(policy))
            self.url = self.server.start()
            servers.append(self.server)

        def client(self, model: str = "mock", **cfg: Any):
            cfg.setdefault("max_attempts", 3)
            cfg.setdefault("backoff_initial_sec", 0.01)
            cfg.setdefault("backoff_max_sec", 0.05)
            cfg.setdefault("timeout_sec", 10)
            return make_client("agent", RoleConfig(model=model, base_url=self.url, **cfg))

        @property
        def requests(self) -> list:
            return self.server.requests

    yield Handle
    for s in servers:
        s.stop()


def write_files(root: Path, files: dict[str, str | dict]) -> Path:
    """Write {relative path: text or YAML-able dict} under root."""
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, (dict, list)):
            p.write_text(yaml.safe_dump(content, sort_keys=False))
        else:
            p.write_text(textwrap.dedent(content).lstrip("\n"))
    return root


def tool_yaml(name: str, props: dict | None = None, required: list[str] | None = None) -> dict:
    schema: dict[str, Any] = {"type": "object", "properties": props or {}, "additionalProperties": False}
    if required:
        schema["required"] = required
    return {"name": name, "description": f"the {name} tool", "input_schema": schema}


@pytest.fixture
def make_workspace(tmp_path: Path) -> Callable[..., Path]:
    """Build a workspace: agent.yaml from kwargs, a prompt, plus extra files."""
    counter = {"n": 0}

    def make(files: dict[str, Any] | None = None, *, prompt: str = "You are a test agent.", **agent: Any) -> Path:
        counter["n"] += 1
        root = tmp_path / f"ws{counter['n']}"
        cfg = {"name": agent.pop("name", "test-agent"), "system_prompt": "systemprompt.md", **agent}
        write_files(root, {"agent.yaml": cfg, "systemprompt.md": prompt, **(files or {})})
        return root

    return make


@pytest.fixture
def seed_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "seed"
    shutil.copytree(SEED, dst)
    return dst
