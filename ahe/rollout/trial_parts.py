"""What every kind of trial shares: the per-executor context, the sandbox, the seal, result.json.

`result.json` is written last and atomically: its presence is what marks a trial finished.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ahe.agents import AgentBackend, backend_name, make_agent_backend
from ahe.errors import AheError
from ahe.io import atomic_write_json
from ahe.llm.types import ModelClient
from ahe.llm.usage import UsageLedger
from ahe.rollout.models import TrialResult, TrialSpec
from ahe.tasks.snapshot import TaskSeal

RESULT_FILE = "result.json"
# Scratch a finished trial does not need: staged verifier files, the sandbox's /tmp and home,
# and the sandbox's own /logs (root/sandbox-logs: the agent could write it; the verifier's part
# is already copied to the trial's verifier/). root/logs, AHE's record of every command's full
# output (which the sandbox cannot reach), is kept for the debugger.
SCRATCH = ("stage", "root/tmp", "root/home", "root/sandbox-logs", "channel")


@dataclass
class TrialContext:
    """Per-process caches shared by the trials an executor runs: model clients, usage, and one
    instance of each agent backend (which may keep warm confined workers). The harness itself is
    never loaded here: each trial's session loads it in its own jail."""

    ledger: UsageLedger = field(default_factory=UsageLedger)
    # Where model clients read base URL, model and key; None = os.environ. A Ray worker passes
    # the keys it was handed in memory, so they never enter its process environment.
    env: Mapping[str, str] | None = None
    _clients: dict[str, ModelClient] = field(default_factory=dict)
    _backends: dict[str, AgentBackend] = field(default_factory=dict)

    def backend(self, spec: TrialSpec) -> AgentBackend:
        """The agent backend that runs `spec`'s sessions (harness.yaml, or the spec's override)."""
        name = backend_name(spec.workspace, spec.agent_backend)
        if name not in self._backends:
            self._backends[name] = make_agent_backend(name)
        return self._backends[name]

    def expect(self, specs: list[TrialSpec]) -> None:
        """These trials start later: their backends may warm workers for them."""
        counts: dict[str, tuple[TrialSpec, int]] = {}
        names: dict[tuple[str, str | None], str | None] = {}  # harness.yaml read once per harness, not per trial
        for spec in specs:
            where = (str(spec.workspace), spec.agent_backend)
            if where not in names:
                try:
                    names[where] = backend_name(spec.workspace, spec.agent_backend)
                except AheError:  # the trial itself reports it
                    names[where] = None
            key = names[where]
            if key is None:
                continue
            first, n = counts.get(key, (spec, 0))
            counts[key] = (first, n + 1)
        for first, n in counts.values():
            self.backend(first).expect(n)

    async def drain(self) -> None:
        for backend in self._backends.values():
            await backend.drain()

    def client(self, spec: TrialSpec) -> ModelClient:
        key = spec.agent_role.model_dump_json()
        if key not in self._clients:
            from ahe.llm import make_client

            env = os.environ if self.env is None else self.env
            self._clients[key] = make_client("agent", spec.agent_role, ledger=self.ledger, env=env)
        return self._clients[key]

    async def aclose(self) -> None:
        """Close the backends (their spare workers die) and the clients' connection pools, on the
        loop that opened them (else the garbage collector closes them on a loop that is gone)."""
        for backend in self._backends.values():
            try:
                await backend.aclose()
            except Exception:  # a backend that fails to close loses no result
                pass
        self._backends.clear()
        for client in self._clients.values():
            close = getattr(client, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception:  # a pool that fails to close loses no result
                    pass


def load_result(trial_dir: Path) -> TrialResult | None:
    """The finished result of a trial folder, or None when it is absent or unreadable."""
    path = trial_dir / RESULT_FILE
    try:
        return TrialResult.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None


def seal_of(spec: TrialSpec) -> TaskSeal | None:
    """The seal this trial's verifier runs from: travelling with the spec, or the run's seal folder's."""
    if spec.sealed is not None:
        return spec.sealed
    if spec.seal_dir is None:
        return None
    from ahe.tasks.snapshot import sealed_entry

    return sealed_entry(spec.seal_dir, spec.task_name)


def sandbox_for(spec: TrialSpec, task: Any) -> Any:
    """The trial's (unstarted) sandbox, from the backend the spec names for the task's environment."""
    from ahe.tasks.sandboxes import factories_for

    factories = factories_for(spec.sandbox, isolation=spec.isolation)
    factory = factories.get(task.runs_on)
    if factory is None:  # plan_rollouts skips these; a hand-made spec may not
        raise AheError(f"task {task.name} needs --sandbox {task.runs_on}")
    return factory(task, spec.trial_dir)


async def stop_sandbox(sandbox: Any, trial_dir: Path) -> None:
    """Stop the trial's sandbox; a failure to stop is noted beside the trial, never raised."""
    if sandbox is None:
        return
    try:
        await sandbox.stop()
    except Exception as exc:  # stopping must not hide the trial's own outcome
        (trial_dir / "sandbox-stop-error.txt").write_text(repr(exc))


def write_result(spec: TrialSpec, result: TrialResult, t0: float) -> TrialResult:
    """Close a trial: its duration, scratch removed, result.json written last (= finished)."""
    result.duration_sec = round(time.monotonic() - t0, 3)
    for scratch in SCRATCH + (() if spec.keep_app else ("app",)):
        shutil.rmtree(spec.trial_dir / scratch, ignore_errors=True)
    atomic_write_json(spec.trial_dir / RESULT_FILE, json.loads(result.model_dump_json()))
    return result
