"""What the evolve agent's tools share during a phase: seeded into `Session(state={"evolve": ctx})`."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evolve_agent.replay.models import ReplaySettings

from ahe.harness.repo import HarnessRepo
from evolve_agent.confine import Confinement
from ahe.harness.manifest import ChangeEntry, Manifest, Refusal, write_manifest
from evolve_agent.protected import BaseSnapshot

STATE_KEY = "evolve"


class EvolveLimits(BaseModel):
    """Budgets of one evolve phase. The main session gets `max_turns`/`wall_clock_sec`; each
    repair session (one per change the gate rejects) gets the `repair_*` budgets."""

    model_config = ConfigDict(extra="forbid")

    max_turns: int = Field(default=80, ge=1)
    wall_clock_sec: float = Field(default=3600, gt=0)
    max_context_tokens: int = Field(default=200_000, ge=1000)
    shell_timeout_sec: float = Field(default=120, gt=0)  # the most one shell command may take
    repair_max_turns: int = Field(default=20, ge=1)
    repair_wall_clock_sec: float = Field(default=600, gt=0)
    smoke_timeout_sec: float = Field(default=60, gt=0)  # one smoke session of the gate
    require_isolated_shell: bool = True  # without bwrap the shell tool is disabled, not unjailed
    replay: ReplaySettings = Field(default_factory=ReplaySettings)  # regression foresight at record_change


@dataclass
class EvolveContext:
    repo: HarnessRepo
    confinement: Confinement
    base_commit: str
    base: BaseSnapshot
    manifest: Manifest
    limits: EvolveLimits
    iteration: int
    experiment_dir: Path | None
    known_tasks: set[str] = field(default_factory=set)
    progress_path: Path | None = None  # manifest progress while the agent works
    jail: Any = None  # the LocalSandbox of the shell, or None
    jail_problem: str | None = None  # why there is no shell
    session_label: str = "main"
    repair_id: str | None = None  # in a repair session: the only change id record_change takes
    repair_result: ChangeEntry | None = None
    finish_warned: bool = False
    reported_problems: set[str] = field(default_factory=set)  # protection problems the shell saw
    tasks_dir: Path | None = None  # the task folders (re-execution sets up their sandboxes)
    replay: Any = None  # ReplaySettings of regression foresight (None: the defaults)
    replay_dir: Path | None = None  # where each change's full replay report is written
    # The explore agent (explore_agent/) runs on this same path with these two set: the component
    # classes record_change accepts (None = all), and source names evidence may cite instead of tasks.
    allowed_components: frozenset[str] | None = None
    evidence_sources: frozenset[str] = frozenset()
    allowed_paths: tuple[str, ...] | None = None  # path prefixes a change may touch (None = all)
    registry_keys: frozenset[str] | None = None  # agent.yaml keys a change may alter (None = all)
    id_prefix: str = ""  # new change ids start with it (a search tree's child: n004-chg-1), commit messages too
    lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def workspace(self) -> Path:
        return self.confinement.workspace

    def refuse(self, session: Any, tool: str, reason: str, *, path: str | None = None, command: str | None = None) -> None:
        """Record a refusal: in the manifest (for the caller) and as an event of the session."""
        rec = Refusal(tool=tool, reason=reason, path=path, command=command, session=self.session_label)
        with self.lock:
            self.manifest.refusals.append(rec)
        if session is not None:
            try:
                session.note("refusal", tool=tool, reason=reason, path=path, command=command)
            except Exception:
                pass
        self.save_progress()

    def save_progress(self) -> None:
        if self.progress_path is not None:
            try:
                write_manifest(self.progress_path, self.manifest)
            except OSError:
                pass


def discard_all(repo: HarnessRepo) -> list[str]:
    """Throw away every uncommitted edit, ignored files included; return the files that had edits."""
    changed = repo.changed_files()
    if repo.is_dirty() or changed:
        repo.repo.git.reset("--hard", "-q")
    repo.repo.git.clean("-fdxq")  # -x: also what an ignore rule hid (bytecode, caches)
    return changed


def get_context(state: dict[str, Any] | None) -> EvolveContext:
    ctx = (state or {}).get(STATE_KEY)
    if not isinstance(ctx, EvolveContext):
        raise RuntimeError(
            "the evolve agent's tools need an EvolveContext in the session state under 'evolve'; "
            "run them through evolve_agent.run_evolve_phase"
        )
    return ctx
