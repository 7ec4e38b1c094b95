"""One evolve phase: the evolve agent edits the harness, the gate validates every change.

`run_evolve_phase` is what the loop calls (DESIGN.md §7, §8). It never raises for a model or
sandbox failure: the manifest records what happened (`infra_error`) and the harness is left
as the base plus the accepted changes.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ahe.harness.manifest import ChangeEntry, Discard, Manifest, write_manifest
from ahe.harness.repo import HarnessRepo
from ahe.llm.types import RoleConfig, Usage
from ahe.run_folder import RunFolder
from ahe.tasks.loader import task_folders
from ahe.tempdirs import make_temp_dir
from evolve_agent.confine import EXPERIMENT_MOUNT, HIDDEN_FROM_EVOLVE, WORKSPACE_MOUNT, Confinement
from evolve_agent.context import STATE_KEY, EvolveContext, EvolveLimits, discard_all
from evolve_agent.gate import run_gate
from evolve_agent.leakage import task_text
from evolve_agent.protected import BaseSnapshot
from evolve_agent.summary import write_summary

log = logging.getLogger(__name__)

WORKSPACE = Path(__file__).resolve().parent / "workspace"
PROGRESS_FILE = "manifest.partial.json"


@dataclass(frozen=True)
class AgentSpec:
    """Which agent runs the phase. The default is the evolve agent; the explore agent
    (explore_agent/) passes its own workspace, first message and limits on what it may record.
    `prior_changes` start the manifest (already accepted changes of the same iteration), so ids
    continue after them and the iteration has one manifest."""

    workspace: Path = WORKSPACE
    instruction: str | None = None
    allowed_components: frozenset[str] | None = None
    evidence_sources: frozenset[str] = frozenset()
    allowed_paths: tuple[str, ...] | None = None
    registry_keys: frozenset[str] | None = None
    prior_changes: tuple[ChangeEntry, ...] = ()
    id_prefix: str = ""  # new change ids start with it (a search tree's child: "n004-" makes n004-chg-1)


def known_tasks(experiment_dir: Path | None, iteration: int, tasks_dir: Path | None) -> set[str]:
    names: set[str] = set()
    if tasks_dir is not None:
        for folder in task_folders(Path(tasks_dir)):
            names |= task_text(folder).names
    if experiment_dir is not None:
        results = RunFolder(experiment_dir).iteration(iteration).results()
        if results is not None:
            names |= set(results.tasks)
    return names


def build_instruction(experiment_dir: Path | None, iteration: int, base_commit: str, tasks: set[str],
                      limits: EvolveLimits, workspace: Path | None = None) -> str:
    """The evolve agent's first message: where things are, what the last round decided and (with
    `workspace`) which of the harness's files is which component class."""
    lines = [f"Iteration {iteration}. The harness in {WORKSPACE_MOUNT} is at commit {base_commit[:12]}.", ""]
    if workspace is not None:
        from evolve_agent.components import component_map_lines

        parts = component_map_lines(workspace)
        lines += parts + ([""] if parts else [])
    if experiment_dir is None:
        lines.append("There is no experiment folder this time; work from the harness alone.")
    else:
        run = RunFolder(experiment_dir)
        d = run.iteration(iteration)
        rel = lambda p: str(p.relative_to(run.root))  # noqa: E731 - paths as the agent sees them
        candidates = [rel(run.history_md), rel(run.scores_json)] + [
            rel(p) for p in (d.results_json, d.attribution_json, d.rollback_json, d.analysis / "overview.md",
                             d.analysis / "overview.json", d.analysis / "facts.json", d.analysis / "tasks", d.corpus)]
        present = [c for c in candidates if (run.root / c).exists()]
        missing = [c for c in candidates if c not in present]
        lines.append(f"Start with these files of {EXPERIMENT_MOUNT} (read-only):")
        lines += [f"- {EXPERIMENT_MOUNT}/{c}" for c in present] or ["- (none of the usual files exist yet)"]
        if missing:
            lines.append(f"Not present this time: {', '.join(missing)}.")
        earlier = [f"{n:03d}" for n in run.iterations() if run.iteration(n).manifest_json.exists()]
        if earlier:
            lines.append(f"Earlier manifests (changes and their predictions): iterations {', '.join(earlier)}, "
                         f"at {EXPERIMENT_MOUNT}/{rel(run.iterations_dir)}/NNN/evolve/manifest.json.")
        rollback = d.rollback()
        if rollback is not None and rollback.rolled_back:
            lines.append("")
            lines.append("Rolled back at the start of this iteration (their predictions did not hold):")
            lines += [f"- {r.change_id}: {r.reason}" for r in rollback.rolled_back]
        attribution = d.attribution()
        if attribution is not None and attribution.changes:
            lines.append("")
            lines.append("Verdicts on the previous iteration's changes:")
            lines += [f"- {v.change_id} [{v.component}]: {v.verdict} — {v.reason}" for v in attribution.changes]
    if tasks:
        shown = sorted(tasks)
        more = f" (and {len(shown) - 80} more)" if len(shown) > 80 else ""
        lines += ["", f"Task names (use them in predictions and evidence): {', '.join(shown[:80])}{more}."]
    lines += ["", f"Budget: {limits.max_turns} turns, {limits.wall_clock_sec / 60:.0f} minutes. Record each logical "
              "edit with record_change, then call finish."]
    return "\n".join(lines)


def _repair_message(entry: ChangeEntry, errors: list[str]) -> str:
    bullet = "\n".join(f"- {e}" for e in errors)
    return (
        f"The validation gate rejected your change {entry.id} ({entry.summary}), commit {entry.commit}:\n{bullet}\n\n"
        f"The change has been reverted, and its edits are back in {WORKSPACE_MOUNT} as uncommitted changes "
        f"(files: {', '.join(entry.files)}). This is your one chance to fix it: correct the edit, then record it "
        f"again with record_change using id {entry.id!r} (you may change its files and fields). If it cannot be "
        "fixed, call finish and the change is dropped."
    )


class _PhaseRunner:
    def __init__(self, repo: HarnessRepo, ctx: EvolveContext, client: Any, out_dir: Path, limits: EvolveLimits,
                 workspace: Path = WORKSPACE) -> None:
        self.repo, self.ctx, self.client, self.out_dir, self.limits = repo, ctx, client, out_dir, limits
        self.workspace = workspace
        self.usage = Usage()

    def _agent(self, max_turns: int) -> Any:
        from ahe.runtime import load_agent

        agent = load_agent(self.workspace)
        agent.config = agent.config.model_copy(
            update={"max_turns": max_turns, "max_context_tokens": self.limits.max_context_tokens})
        return agent

    async def session(self, message: str, *, max_turns: int, wall_clock: float, trace_dir: Path) -> Any:
        from ahe.runtime import Session

        session = Session(self._agent(max_turns), self.client, sandbox=self.ctx.jail, trace_dir=trace_dir,
                          wall_clock_sec=wall_clock, working_directory=WORKSPACE_MOUNT,
                          state={STATE_KEY: self.ctx})
        result = await session.run(message)
        self.usage = self.usage.add(result.usage)
        return result

    def discard_leftovers(self, reason: str) -> None:
        changed = discard_all(self.repo)
        if changed:
            self.ctx.manifest.discarded.append(Discard(files=changed, reason=reason, session=self.ctx.session_label))

    async def repair(self, entry: ChangeEntry, errors: list[str]) -> ChangeEntry | None:
        ctx = self.ctx
        ctx.session_label, ctx.repair_id, ctx.repair_result, ctx.finish_warned = f"repair {entry.id}", entry.id, None, False
        try:
            result = await self.session(_repair_message(entry, errors), max_turns=self.limits.repair_max_turns,
                                        wall_clock=self.limits.repair_wall_clock_sec,
                                        trace_dir=self.out_dir / "repairs" / entry.id)
            if result.infra_error:
                ctx.manifest.gate_notes.append(f"the repair session of {entry.id} failed: {result.detail}")
            self.discard_leftovers(f"not recorded when the repair session of {entry.id} ended ({result.stop_reason.value})")
            return ctx.repair_result
        finally:
            ctx.session_label, ctx.repair_id, ctx.repair_result = "main", None, None


def _hiding_mounts(experiment_dir: Path, masks: Path) -> list[Any]:
    """An empty read-only folder or file over each hidden run-folder entry (confine.HIDDEN_FROM_EVOLVE),
    so the shell cannot read what the file tools refuse."""
    from ahe.sandbox.base import Mount

    (masks / "folder").mkdir(parents=True, exist_ok=True)
    (masks / "file").write_bytes(b"")
    out = []
    for name in HIDDEN_FROM_EVOLVE:
        entry = experiment_dir / name
        if entry.is_dir() or entry.is_file():
            out.append(Mount(source=masks / ("folder" if entry.is_dir() else "file"), target=f"{EXPERIMENT_MOUNT}/{name}"))
    return out


async def _start_jail(workspace: Path, experiment_dir: Path | None, limits: EvolveLimits) -> tuple[Any, str | None, Path | None]:
    """The shell's bwrap jail: /workspace rw (its .git ro), /experiment ro, no network."""
    from ahe.sandbox.base import Mount
    from ahe.sandbox.local import LocalSandbox

    folder = make_temp_dir("evolve-jail")  # removed whole when the phase ends
    app = folder / "app"
    app.mkdir()
    mounts = [Mount(source=workspace, target=WORKSPACE_MOUNT, writable=True)]
    if (workspace / ".git").is_dir():
        mounts.append(Mount(source=workspace / ".git", target=f"{WORKSPACE_MOUNT}/.git", writable=False))
    if experiment_dir is not None and experiment_dir.is_dir():
        mounts.append(Mount(source=experiment_dir, target=EXPERIMENT_MOUNT, writable=False))
        mounts += _hiding_mounts(experiment_dir, folder / "hidden")
    sandbox = LocalSandbox(app, mounts=mounts, network=False, workdir=WORKSPACE_MOUNT,
                           isolation="bwrap" if limits.require_isolated_shell else "auto")
    try:
        await sandbox.start()
    except Exception as exc:
        shutil.rmtree(folder, ignore_errors=True)
        return None, f"the jail could not start: {exc}", None
    return sandbox, None, folder


def _reject_unverified(repo: HarnessRepo, manifest: Manifest, why: str) -> None:
    """After a failure of the phase itself: no change that was not accepted may stay applied."""
    for entry in reversed(manifest.changes):
        if entry.status != "recorded":
            continue
        entry.status = "rejected"
        entry.gate_errors.append(why)
        if entry.commit:
            try:
                entry.revert_commits.append(repo.revert(entry.commit, f"evolve phase: drop unverified {entry.id}").commit)
            except Exception as exc:
                entry.gate_errors.append(f"could not revert {entry.commit}: {exc}")


async def run_evolve_phase(
    *,
    repo: HarnessRepo,
    experiment_dir: Path,
    iteration: int,
    out_dir: Path,
    role: RoleConfig,
    tasks_dir: Path | None,
    limits: EvolveLimits | None = None,
    gate_policy_server_url: str | None = None,
    agent: "AgentSpec | None" = None,
) -> Manifest:
    """Run the evolve agent on `repo`, validate its changes, write manifest.json and summary.md.

    Returns the manifest. A failure of the evolve model is recorded as `infra_error`; changes
    recorded before it still go through the gate. The phase never leaves unrecorded edits or
    unvalidated changes in the workspace.
    """
    limits = limits or EvolveLimits()
    agent = agent or AgentSpec()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    experiment = Path(experiment_dir) if experiment_dir is not None else None
    base_commit = repo.head()
    manifest = Manifest(iteration=iteration, base_commit=base_commit, changes=[c.model_copy() for c in agent.prior_changes])
    progress = out_dir / PROGRESS_FILE
    jail = app = None
    runner: _PhaseRunner | None = None
    try:
        _clear_artifacts(out_dir)
        leftovers = discard_all(repo)
        if leftovers:
            manifest.discarded.append(Discard(files=leftovers, reason="uncommitted edits found before the phase started"))
        ctx = _make_context(repo, experiment, iteration, base_commit, manifest, limits, tasks_dir, agent, out_dir)
        jail, problem, app = await _start_jail(repo.path, experiment, limits)
        ctx.jail, ctx.jail_problem = jail, problem
        manifest.shell_isolated = bool(jail is not None and jail.isolated)
        if problem:
            manifest.gate_notes.append(f"the shell tool was disabled: {problem}")

        runner = _make_runner(repo, ctx, manifest, role, out_dir, limits, agent)
        if runner is not None:
            await _run_session(runner, ctx, manifest, out_dir, limits, agent, tasks_dir, gate_policy_server_url)
    except asyncio.CancelledError:
        try:
            discard_all(repo)
            write_manifest(progress, manifest)
        finally:
            await _stop_jail(jail, app)
        raise
    except Exception as exc:  # never crash the loop: record, and drop whatever was not validated
        log.exception("the evolve phase failed")
        manifest.infra_error = f"the evolve phase failed: {type(exc).__name__}: {exc}"
        try:
            discard_all(repo)
            _reject_unverified(repo, manifest, manifest.infra_error)
        except Exception as inner:
            manifest.gate_notes.append(f"cleaning up after the failure failed too: {inner}")
    await _stop_jail(jail, app)
    if runner is not None:
        manifest.usage = {k: v for k, v in runner.usage.model_dump().items() if v is not None}
    manifest.head_commit = repo.head()
    write_manifest(out_dir / "manifest.json", manifest)
    write_summary(out_dir / "summary.md", manifest)
    progress.unlink(missing_ok=True)
    return manifest


def _make_context(repo: HarnessRepo, experiment: Path | None, iteration: int, base_commit: str, manifest: Manifest,
                  limits: EvolveLimits, tasks_dir: Path | None, agent: "AgentSpec", out_dir: Path) -> EvolveContext:
    """What every tool of the session sees: the repo, its confinement, the base snapshot, the scope."""
    return EvolveContext(
        repo=repo,
        confinement=Confinement(repo.path, experiment),
        base_commit=base_commit,
        base=BaseSnapshot.from_commit(repo, base_commit),
        manifest=manifest,
        limits=limits,
        iteration=iteration,
        experiment_dir=experiment,
        known_tasks=known_tasks(experiment, iteration, tasks_dir),
        progress_path=out_dir / PROGRESS_FILE,
        tasks_dir=Path(tasks_dir) if tasks_dir is not None else None,
        replay=limits.replay,
        replay_dir=out_dir / "replay",
        allowed_components=agent.allowed_components,
        evidence_sources=agent.evidence_sources,
        allowed_paths=agent.allowed_paths,
        registry_keys=agent.registry_keys,
        id_prefix=agent.id_prefix,
    )


def _make_runner(repo: HarnessRepo, ctx: EvolveContext, manifest: Manifest, role: RoleConfig, out_dir: Path,
                 limits: EvolveLimits, agent: "AgentSpec") -> "_PhaseRunner | None":
    """The session runner on the evolve model's client; None (and `infra_error`) when it is unusable."""
    from ahe.llm import make_client

    try:
        client = make_client("evolve", role)
    except Exception as exc:
        manifest.infra_error = f"the evolve model is not usable: {exc}"
        return None
    return _PhaseRunner(repo, ctx, client, out_dir, limits, agent.workspace)


async def _run_session(runner: "_PhaseRunner", ctx: EvolveContext, manifest: Manifest, out_dir: Path,
                       limits: EvolveLimits, agent: "AgentSpec", tasks_dir: Path | None,
                       gate_policy_server_url: str | None) -> None:
    """The agent's session, then the gate on what it recorded."""
    instruction = agent.instruction or build_instruction(ctx.experiment_dir, ctx.iteration, ctx.base_commit,
                                                         ctx.known_tasks, limits, ctx.repo.path)
    result = await runner.session(instruction, max_turns=limits.max_turns, wall_clock=limits.wall_clock_sec,
                                  trace_dir=out_dir)
    manifest.stop_reason = result.stop_reason.value
    if result.infra_error:
        manifest.infra_error = f"the evolve model failed: {result.detail}"
    runner.discard_leftovers(f"not recorded when the session ended ({result.stop_reason.value})")
    ctx.save_progress()
    await run_gate(ctx.repo, manifest, base_commit=ctx.base_commit, tasks_dir=tasks_dir,
                   smoke_url=gate_policy_server_url, repair=runner.repair,
                   smoke_timeout_sec=limits.smoke_timeout_sec, trace_dir=out_dir / "gate")

def _clear_artifacts(out_dir: Path) -> None:
    """What an earlier, killed attempt of this phase left in out_dir (the phase is redone whole)."""
    for name in ("trajectory.json", "events.jsonl", "manifest.json", "summary.md", PROGRESS_FILE):
        (out_dir / name).unlink(missing_ok=True)
    for name in ("gate", "repairs", "sub_agents", "replay"):
        shutil.rmtree(out_dir / name, ignore_errors=True)


async def _stop_jail(jail: Any, app: Path | None) -> None:  # app: the jail's temp folder
    if jail is not None:
        try:
            await jail.stop()
        except Exception:
            pass
    if app is not None:
        shutil.rmtree(app, ignore_errors=True)
