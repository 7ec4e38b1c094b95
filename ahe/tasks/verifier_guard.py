"""What the agent may have left for the verifier to run in its place, found before it runs (issue 33).

The verifier runs in the sandbox the agent worked in, so anything the agent left where the
verifier's programs look first would be run as the verifier: a `python`, `pytest` or `bash`
earlier on its PATH, a `sitecustomize.py` on its Python path, a `conftest.py` or pytest
configuration above /tests, a forged `__pycache__/*.pyc`. Three answers, from the strongest:

- the agent's processes are ended first (`end_processes`): nothing rewrites anything meanwhile;
- what cannot be changed need not be checked: under bubblewrap the system and `/` are read-only
  (proven by tests/adversarial/test_verifier_forgery.py); a forged `.pyc` is never read
  (`verifier_python_env`: bytecode from a fresh cache of its own, no user site);
- the rest is found: planted files that only a forger puts there are removed (`PLANTED`) and
  named in the verifier's record; an interpreter the agent replaced in a system folder (a
  sandbox that can tell, `system_changes()`: docker) fails the trial, since no verdict that
  program gives can be believed.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import uuid
from typing import Any

from ahe.sandbox.base import Sandbox, SandboxError

# A verifier's Python imports these at start from any folder on its path; pytest reads these
# from every folder above the tests (/ is /tests' only parent). No task's work is one of them.
_STARTUP_MODULES = ("sitecustomize.py", "usercustomize.py")
_ABOVE_TESTS = ("conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")
PLANTED = tuple(f"/{n}" for n in _STARTUP_MODULES + _ABOVE_TESTS) + tuple(
    f"{d}/{n}" for d in ("/app", "/tmp") for n in _STARTUP_MODULES)
# What a verifier runs by name: replaced in a system folder, it would answer for the verifier.
INTERPRETER = re.compile(r"(python[0-9.]*|pytest|py\.test|bash|sh|dash|env|uv|uvx|timeout)")
SYSTEM_BIN = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


async def end_processes(sandbox: Sandbox) -> None:
    """End every process the agent (or the oracle) left in the sandbox before the verifier runs.

    A backend that cannot do this cannot be trusted with a verifier: refused in one sentence,
    never skipped."""
    kill = getattr(sandbox, "kill_processes", None)
    if kill is None:
        raise SandboxError(
            f"the {type(sandbox).__name__} sandbox cannot end the agent's processes before the "
            "verifier (it has no kill_processes()), so a process the agent left could forge the "
            "reward; give it one (docs/sandboxes.md) or use the local or docker sandbox"
        )
    await kill()


def verifier_python_env() -> dict[str, str]:
    """What every verifier's Python runs with, so nothing the agent left is imported in its place:
    bytecode only from a fresh cache of its own (a forged `__pycache__/*.pyc` beside the source is
    never read), and no user site (a `usercustomize.py` or `.pth` in ~/.local is never run).
    A task's own [verifier] env may set them otherwise."""
    return {"PYTHONPYCACHEPREFIX": f"/tmp/.ahe-verifier-pycache-{uuid.uuid4().hex}",
            "PYTHONNOUSERSITE": "1"}


async def remove_planted(sandbox: Sandbox, env: dict[str, str]) -> list[str]:
    """Remove the startup and configuration files the agent planted where the verifier would
    read them (also in every folder of the verifier's PYTHONPATH); the paths removed."""
    paths = list(PLANTED)
    for folder in env.get("PYTHONPATH", "").split(":"):
        if folder.startswith("/"):
            paths += [posixpath.join(folder, n) for n in _STARTUP_MODULES]
    quoted = " ".join(shlex.quote(p) for p in dict.fromkeys(paths))
    run = await sandbox.exec(
        f'for p in {quoted}; do if [ -e "$p" ] || [ -L "$p" ]; then rm -rf -- "$p" 2>/dev/null; echo "$p"; fi; done',
        timeout=60)
    return [line for line in run.stdout.splitlines() if line.startswith("/")]


async def replaced_interpreters(sandbox: Sandbox) -> list[str]:
    """The programs a verifier runs by name that the agent added or changed in a system folder,
    as far as the sandbox can tell (`system_changes()`: paths added or changed since its image);
    a sandbox whose system is read-only has none to tell."""
    changes = getattr(sandbox, "system_changes", None)
    if changes is None:
        return []
    found: list[str] = await changes()
    return sorted(p for p in found if _is_interpreter(p))


def _is_interpreter(path: Any) -> bool:
    folder, name = posixpath.split(str(path))
    return folder in SYSTEM_BIN and INTERPRETER.fullmatch(name) is not None
