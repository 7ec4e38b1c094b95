"""The evolution loop (DESIGN.md §1, Algorithm 1), resumable phase by phase.

Iteration t evaluates H_{t-1} (tag iter-{t-1}) and produces H_t (tag iter-{t}):

    rollout → attribution of M_{t-1} (t ≥ 2) → rollback → debug → evolve → tag

After the last iteration the final harness is evaluated too (rollout, attribution,
rollback; no new edits), so the last manifest's predictions are checked like every other.
H_best is the evaluated harness with the highest pass@1 (ties keep the earlier one).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from ahe.config import ExperimentConfig, dump_experiment_config
from ahe.errors import AheError
from ahe.evolution.attribution import Attribution, attribute
from ahe.evolution.records import IterationScore, LoopState, RunFolder, Scores
from ahe.harness.repo import HarnessRepo
from ahe.evolution.rollback import apply_rollbacks
from ahe.llm.types import RoleConfig
from ahe.rollout.models import RunResults
from ahe.rollout.scheduler import RolloutConfig, run_rollouts
from ahe.io import atomic_write_json, atomic_write_text

SEED_DEFAULT = Path(__file__).resolve().parents[2] / "harness_workspace"


class StopRequested(Exception):
    """Ctrl-C: the current phase was interrupted; it will be redone on --resume."""


class EvolutionLoop:
    def __init__(self, cfg: ExperimentConfig, run_dir: Path, *, console: Console | None = None) -> None:
        self.cfg = cfg
        self.run = RunFolder(run_dir)
        self.console = console or Console(stderr=True, quiet=True)
        self.stop_requested = False
        self.roles: dict[str, RoleConfig] = {}
        self._t0 = time.monotonic()

    # ------------------------------------------------------------------ setup
    def prepare(self, *, resume: bool) -> HarnessRepo:
        root = self.run.root
        if resume:
            if not (root / "loop_state.json").exists():
                raise AheError(f"--resume {root}: no loop_state.json there; is it a run folder made by `ahe evolve`?")
            return HarnessRepo(self.run.workspace)
        if root.exists() and any(root.iterdir()):
            raise AheError(f"{root}: already exists; use `ahe evolve --resume {root}` to continue it, or choose a new folder")
        root.mkdir(parents=True, exist_ok=True)
        seed = self.cfg.seed_workspace or SEED_DEFAULT
        from ahe.runtime import load_agent

        load_agent(seed)  # a broken seed fails before anything is written
        repo = HarnessRepo.create(self.run.workspace, seed)
        atomic_write_text(root / "experiment.yaml", dump_experiment_config(self.cfg))
        self.run.save_state(LoopState())
        self.run.history(f"- {time.strftime('%Y-%m-%d %H:%M')} started `{self.cfg.name}`: seed {repo.head()[:10]} (tag iter-000), "
                         f"{self.cfg.iterations} iterations, k={self.cfg.k}, tasks {self.cfg.tasks}")
        return repo

    # ------------------------------------------------------------------ main
    async def run_loop(self, repo: HarnessRepo, role_urls: dict[str, str | None]) -> LoopState:
        for role in ("agent", "debugger", "evolve"):
            base: RoleConfig = getattr(self.cfg.models, role)
            url = role_urls.get(role)
            self.roles[role] = base.model_copy(update={"base_url": url, "model": base.model or "mock"}) if url else base
        state = self.run.load_state()
        scores = self.run.load_scores()
        self._elapsed_before = state.elapsed_sec
        last = self.cfg.iterations + (1 if self.cfg.evaluate_final else 0)
        try:
            for it in range(1, last + 1):
                final = it > self.cfg.iterations
                phases = ("rollout", "attribution", "rollback") if final else ("rollout", "attribution", "rollback", "debug", "evolve")
                for phase in phases:
                    if state.is_done(it, phase):
                        continue
                    if phase in ("attribution", "rollback") and it == 1:
                        state.mark(it, phase)
                        continue
                    await self._run_phase(it, phase, repo, state, scores, final=final)
                    state.mark(it, phase)
                    state.elapsed_sec = self._elapsed()
                    self.run.save_state(state)
                    if self.stop_requested:
                        raise StopRequested()
                    reason = self._budget_exceeded(scores, it, phase)
                    if reason:
                        return self._finish(state, reason)
            return self._finish(state, "finished all iterations")
        finally:
            state.elapsed_sec = self._elapsed()
            self.run.save_state(state)

    def _finish(self, state: LoopState, reason: str) -> LoopState:
        state.stopped, state.finished = reason, True
        self.run.save_state(state)
        self.run.history(f"- loop ended: {reason}")
        self.run.event("loop_end", reason=reason)
        return state

    def _elapsed(self) -> float:
        return round(getattr(self, "_elapsed_before", 0.0) + time.monotonic() - self._t0, 3)

    # ------------------------------------------------------------------ phases
    async def _run_phase(self, it: int, phase: str, repo: HarnessRepo, state: LoopState, scores: Scores, *, final: bool) -> None:
        key = f"{it:03d}/{phase}"
        if key in state.phase_base:  # a half-finished phase: back to where it started
            repo.discard_uncommitted()
            repo.repo.git.reset("--hard", "-q", state.phase_base[key])
        else:
            state.phase_base[key] = repo.head()
            self.run.save_state(state)
        self.run.event("phase_start", iteration=it, phase=phase)
        _maybe_kill_self(key)
        self.console.print(f"[bold]iteration {it}{' (final evaluation)' if final else ''}[/] — {phase}")
        t0 = time.monotonic()
        await getattr(self, f"_phase_{phase}")(it, repo, scores, final=final)
        took = round(time.monotonic() - t0, 3)
        score = scores.get(it)
        if score is not None:
            score.timings_sec[phase] = took
            scores.upsert(score)
            self.run.save_scores(scores)
        self.run.event("phase_end", iteration=it, phase=phase, duration_sec=took)

    async def _phase_rollout(self, it: int, repo: HarnessRepo, scores: Scores, *, final: bool) -> None:
        d = self.run.iteration(it)
        tag = f"iter-{it - 1:03d}"
        commit = repo.tag_commit(tag) or repo.head()
        atomic_write_json(d / "harness.json", {"iteration": it, "evaluates": tag, "commit": commit})
        cfg = RolloutConfig(
            tasks_dir=self.cfg.tasks,
            workspace=self.run.workspace,
            include=self.cfg.include,
            k=self.cfg.k,
            concurrency=self.cfg.concurrency,
            agent_role=self.roles["agent"],
            sandbox=self.cfg.sandbox,
            isolation=self.cfg.isolation,
            retry_infra=self.cfg.retry_infra,
            pass_threshold=self.cfg.pass_threshold,
            agent_timeout_sec=self.cfg.agent_timeout_sec,
        )
        progress = None
        if not self.console.quiet:
            from ahe.rollout.display import Progress
            from ahe.rollout.scheduler import plan_rollouts

            plan = plan_rollouts(cfg, d)
            progress = Progress(len(plan.specs), cfg.concurrency, self.console, already_done=len(plan.done))
        with progress or contextlib.nullcontext():
            results = await run_rollouts(
                cfg, d, on_event=progress.on_event if progress else None, should_stop=lambda: self.stop_requested
            )
        if self.stop_requested:
            raise StopRequested()
        # harness.json of the rollout scheduler names the workspace; keep ours (the evaluated commit)
        atomic_write_json(d / "harness.json", {"iteration": it, "evaluates": tag, "commit": commit, "workspace": str(self.run.workspace)})
        score = IterationScore(
            iteration=it,
            harness_commit=commit,
            harness_tag=tag,
            pass_at_1=results.pass_at_1,
            pass_at_k=results.pass_at_k,
            k=results.k,
            n_trials=results.n_trials,
            n_passed=results.n_passed,
            infra_errors=results.infra_errors,
            tokens={"agent": results.usage.total_tokens},
            cost_usd={"agent": results.usage.cost_usd or 0.0},
            final=final,
        )
        scores.upsert(score)
        if scores.best_pass_at_1 is None or results.pass_at_1 > scores.best_pass_at_1 + 1e-12:
            scores.best_iteration, scores.best_commit, scores.best_pass_at_1 = it, commit, results.pass_at_1
            repo.tag("best", commit)
        self.run.save_scores(scores)
        self.run.history(
            f"- iteration {it}: evaluated {tag} ({commit[:10]}): pass@1 {results.pass_at_1:.3f} "
            f"({results.n_passed}/{results.n_trials}), pass@{results.k} {results.pass_at_k:.3f}, "
            f"infra errors {results.infra_errors}; best so far: iteration {scores.best_iteration} ({scores.best_pass_at_1:.3f})"
        )

    def _results(self, it: int) -> RunResults:
        return RunResults.model_validate_json((self.run.iteration(it) / "results.json").read_text())

    def _manifest_changes(self, it: int) -> list[Any]:
        from ahe.harness.manifest import Manifest

        p = self.run.iteration(it) / "evolve" / "manifest.json"
        if not p.exists():
            return []
        return Manifest.model_validate_json(p.read_text()).accepted()

    async def _phase_attribution(self, it: int, repo: HarnessRepo, scores: Scores, *, final: bool) -> None:
        before = {t: s.pass_rate for t, s in self._results(it - 1).tasks.items() if s.trials}
        after = {t: s.pass_rate for t, s in self._results(it).tasks.items() if s.trials}
        att = attribute(
            self._manifest_changes(it - 1),
            before,
            after,
            iteration=it,
            delta=self.cfg.attribution.delta,
            strictness=self.cfg.attribution.strictness,
        )
        atomic_write_json(self.run.iteration(it) / "attribution.json", json.loads(att.model_dump_json()))
        for v in att.changes:
            self.run.event("decision", iteration=it, change=v.change_id, verdict=v.verdict, reason=v.reason)
        fp, rp = att.fix_predictions, att.regression_predictions
        verdicts = ", ".join(f"{v.change_id} {v.verdict}" for v in att.changes) or "no changes to judge"
        self.run.history(
            f"  - attribution of iteration {it - 1}'s changes: {verdicts}; improved {att.improved or '-'}, "
            f"regressed {att.regressed or '-'}; fix precision {_pct(fp.precision)} recall {_pct(fp.recall)}, "
            f"regression precision {_pct(rp.precision)} recall {_pct(rp.recall)}"
        )

    async def _phase_rollback(self, it: int, repo: HarnessRepo, scores: Scores, *, final: bool) -> None:
        att = Attribution.model_validate_json((self.run.iteration(it) / "attribution.json").read_text())
        report = apply_rollbacks(repo, att)
        atomic_write_json(self.run.iteration(it) / "rollback.json", json.loads(report.model_dump_json()))
        score = scores.get(it)
        if score is not None:
            score.kept = [v.change_id for v in att.changes if v.verdict != "rollback"]
            score.rolled_back = [r.change_id for r in report.rolled_back if r.revert_commit]
            scores.upsert(score)
            self.run.save_scores(scores)
        for r in report.rolled_back:
            self.run.event("rollback", iteration=it, change=r.change_id, commit=r.commit, revert_commit=r.revert_commit, error=r.error)
            what = f"reverted by {r.revert_commit[:10]} ({r.method})" if r.revert_commit else f"could not be reverted: {r.error}"
            self.run.history(f"  - rolled back {r.change_id} ({r.commit[:10]}): {r.reason}; {what}")
        if final:
            repo.tag("final")

    async def _phase_debug(self, it: int, repo: HarnessRepo, scores: Scores, *, final: bool) -> None:
        if not self.cfg.debugger.enabled:
            return
        from debugger import run_debug_phase

        summary = await run_debug_phase(
            self.run.iteration(it),
            previous_dir=self.run.iteration(it - 1) if it > 1 else None,
            role=self.roles["debugger"],
            concurrency=self.cfg.debugger.concurrency,
            use_agent=self.cfg.debugger.use_agent,
        )
        usage = getattr(summary, "usage", None)
        self._add_usage(scores, it, "debugger", usage)

    async def _phase_evolve(self, it: int, repo: HarnessRepo, scores: Scores, *, final: bool) -> None:
        from evolve_agent import EvolveLimits, run_evolve_phase

        out = self.run.iteration(it) / "evolve"
        manifest = await run_evolve_phase(
            repo=repo,
            experiment_dir=self.run.root,
            iteration=it,
            out_dir=out,
            role=self.roles["evolve"],
            tasks_dir=self.cfg.tasks,
            limits=EvolveLimits(max_turns=self.cfg.evolve.max_turns, wall_clock_sec=self.cfg.evolve.wall_clock_sec),
        )
        repo.discard_uncommitted()
        repo.tag(f"iter-{it:03d}")
        self._add_usage(scores, it, "evolve", _trajectory_usage(out / "trajectory.json"))
        accepted = [c for c in manifest.changes if c.status == "accepted"]
        rejected = [c for c in manifest.changes if c.status == "rejected"]
        self.run.history(
            f"  - evolve: {len(accepted)} change(s) accepted"
            + "".join(f"\n    - {c.id} [{c.component}] {c.summary} — predicts fixes {c.predicted_fixes or '-'}, "
                      f"risks {c.predicted_regressions or '-'} ({(c.commit or '')[:10]})" for c in accepted)
            + (f"; {len(rejected)} rejected by the gate: " + ", ".join(f"{c.id} ({'; '.join(c.gate_errors)[:200]})" for c in rejected) if rejected else "")
            + f"; harness tagged iter-{it:03d} ({repo.head()[:10]})"
        )

    # ------------------------------------------------------------------ budgets
    def _add_usage(self, scores: Scores, it: int, role: str, usage: Any) -> None:
        score = scores.get(it)
        if score is None or usage is None:
            return
        tokens = getattr(usage, "total_tokens", None)
        if tokens is None and isinstance(usage, dict):
            tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
        cost = getattr(usage, "cost_usd", None) if not isinstance(usage, dict) else usage.get("cost_usd")
        score.tokens[role] = score.tokens.get(role, 0) + int(tokens or 0)
        score.cost_usd[role] = score.cost_usd.get(role, 0.0) + float(cost or 0.0)
        scores.upsert(score)
        self.run.save_scores(scores)

    def _budget_exceeded(self, scores: Scores, it: int, phase: str) -> str | None:
        b = self.cfg.budgets
        if b.wall_clock_hours is not None and self._elapsed() >= b.wall_clock_hours * 3600:
            return f"wall-clock budget of {b.wall_clock_hours} h reached"
        totals = scores.totals()
        for role, limit in b.max_tokens.items():
            if totals["tokens"].get(role, 0) >= limit:
                return f"token budget of {role} ({limit:,}) reached"
        for role, limit in b.max_cost_usd.items():
            if totals["cost_usd"].get(role, 0.0) >= limit:
                return f"cost budget of {role} (${limit}) reached"
        score = scores.get(it)
        if phase == "rollout" and b.target_pass_at_1 is not None and score and score.pass_at_1 >= b.target_pass_at_1:
            return f"target pass@1 {b.target_pass_at_1} reached at iteration {it}"
        return None


def _maybe_kill_self(phase_key: str) -> None:
    """Fault injection for resume tests: AHE_KILL_AT=<iteration>/<phase>[+seconds] SIGKILLs
    this process at the start of that phase (or that many seconds into it)."""
    spec = os.environ.get("AHE_KILL_AT")
    if not spec:
        return
    target, _, delay = spec.partition("+")
    if target != phase_key:
        return
    if delay:
        asyncio.get_running_loop().call_later(float(delay), os.kill, os.getpid(), signal.SIGKILL)
    else:
        os.kill(os.getpid(), signal.SIGKILL)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def _trajectory_usage(path: Path) -> dict[str, Any] | None:
    try:
        fm = json.loads(path.read_text()).get("final_metrics") or {}
    except (OSError, ValueError):
        return None
    return {
        "prompt_tokens": fm.get("total_prompt_tokens", 0),
        "completion_tokens": fm.get("total_completion_tokens", 0),
        "cost_usd": fm.get("total_cost_usd"),
    }


@contextlib.contextmanager
def mock_endpoints(cfg: ExperimentConfig):
    """Start one scripted MOCK model server per role that names a policy."""
    from ahe.testing.endpoint import mock_endpoint

    with contextlib.ExitStack() as stack:
        urls = {
            role: stack.enter_context(mock_endpoint(getattr(cfg.mock_policies, role)))
            for role in ("agent", "debugger", "evolve")
        }
        yield urls


def run_evolution(cfg: ExperimentConfig, run_dir: Path, *, resume: bool, console: Console | None = None) -> LoopState:
    """Run (or resume) the loop; Ctrl-C once stops after the running trials, twice at once."""
    loop = EvolutionLoop(cfg, run_dir, console=console)
    always = Console(stderr=True)  # what must be said even with --quiet
    repo = loop.prepare(resume=resume)
    with mock_endpoints(cfg) as urls:
        for role, url in urls.items():
            if url:
                loop.console.print(f"[yellow]{role}: scripted MOCK model at {url}[/]")

        async def main() -> LoopState:
            task = asyncio.current_task()
            ev_loop = asyncio.get_running_loop()

            def on_sigint() -> None:
                if loop.stop_requested and task is not None:
                    task.cancel()
                    return
                loop.stop_requested = True
                always.print("[yellow]stopping: running trials finish, then the run can be resumed (Ctrl-C again to stop now)[/]")

            with contextlib.suppress(NotImplementedError, RuntimeError):
                ev_loop.add_signal_handler(signal.SIGINT, on_sigint)
            return await loop.run_loop(repo, urls)

        try:
            return asyncio.run(main())
        except (StopRequested, asyncio.CancelledError, KeyboardInterrupt):
            always.print(f"stopped; resume with: ahe evolve --resume {run_dir}")
            return loop.run.load_state()
