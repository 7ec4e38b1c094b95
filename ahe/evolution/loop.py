"""The evolution loop (DESIGN.md §1, Algorithm 1), resumable phase by phase.

Iteration t evaluates H_{t-1} (tag iter-{t-1}) and produces H_t (tag iter-{t}):

    rollout → attribution of M_{t-1} (t ≥ 2) → rollback → debug → evolve → tag

After the last iteration the final harness is evaluated too (rollout, attribution,
rollback; no new edits), so the last manifest's predictions are checked like every other.
H_best is the evaluated harness with the highest pass@1 — or, with `metric: KEY`, the highest
mean of that reward key (ties keep the earlier one); under a policy that judges by evidence
(`noise`) and the pass rate, the harness the pooled evidence rates best, its lead re-evaluated
when close (ahe.evolution.hbest, docs/decisions.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from rich.console import Console
from rich.markup import escape

from ahe.config import ExperimentConfig, dump_experiment_config
from ahe.errors import AheError
from ahe.evolution.metric import PASS_RATE, run_score
from ahe.evolution.metric import label as metric_label
from ahe.evolution.phases import (
    BudgetSpent,
    EvolveOutcome,
    PhaseContext,
    RolloutOutcome,
    StopRequested,
    attribution_phase,
    debug_phase,
    evolve_phase,
    explore_phase,
    rollback_phase,
    rollout_phase,
)
from ahe.evolution.bill import budget_ahead, count_trials_spent
from ahe.evolution.bill_keeper import BillKeeper
from ahe.evolution.budget_spent import spent_budget, wall_clock_spent
from ahe.evolution.holdout import trials_to_come
from ahe.evolution.faults import maybe_kill_self
from ahe.evolution.registry import get_policy, get_search
from ahe.evolution.tree.crossing import clock_crossed, mid_round
from ahe.harness.repo import HarnessRepo
from ahe.io import atomic_write_text
from ahe.resources import seed_workspace
from ahe.llm.types import RoleConfig, Usage
from ahe.rollout.executor import Executor
from ahe.run_folder import PHASES, Attribution, IterationScore, LoopState, RollbackReport, RunFolder, Scores

SEED_DEFAULT = seed_workspace()


class EvolutionLoop:
    def __init__(self, cfg: ExperimentConfig, run_dir: Path, *, console: Console | None = None,
                 executor: Executor | None = None, evolve: Callable[..., Awaitable[Any]] | None = None,
                 forecast_from: Path | None = None) -> None:
        policy = get_policy(cfg.attribution.strictness)  # an unknown policy fails before anything runs
        get_search(cfg.search)  # so does an unknown search strategy
        self.by_evidence = hasattr(policy, "judge_round")  # H_best by the evidence, after each rollback
        self.best_is_latest = bool(getattr(policy, "best_is_latest", False))  # the latest harness, no contest
        if self.by_evidence and cfg.metric != PASS_RATE:
            raise AheError(f"attribution.strictness {cfg.attribution.strictness!r} judges pass/fail evidence, so it "
                           f"cannot judge metric {cfg.metric!r}; use paper, lenient or strict with that metric.")
        self.executor, self.evolve = executor, evolve  # None unless `ahe simulate` replaces them
        self.cfg = cfg
        self.run = RunFolder(run_dir)
        self.console = console or Console(stderr=True, quiet=True)
        self.stop_requested = False
        self.roles: dict[str, RoleConfig] = {}
        self._t0 = time.monotonic()
        self.forecast_from = forecast_from  # `ahe evolve --from RUN`: the start's forecast measured there
        self._split = None  # the run's held-out split (holdout:)
        self.bill = BillKeeper(cfg, self.run, self.console)  # bill.json (ahe.evolution.bill_keeper)

    # ------------------------------------------------------------------ setup
    def prepare(self, *, resume: bool) -> HarnessRepo:
        root = self.run.root
        if resume:
            if not self.run.has_state():
                raise AheError(f"--resume {root}: no loop_state.json there; is it a run folder made by `ahe evolve`?")
            return HarnessRepo(self.run.workspace)
        if root.exists() and any(root.iterdir()):
            raise AheError(f"{root}: already exists; use `ahe evolve --resume {root}` to continue it, or choose a new folder")
        from ahe.evolution.holdout import check_before_start

        check_before_start(self.cfg)  # a held-out split too small for the tasks: one sentence, no run folder
        root.mkdir(parents=True, exist_ok=True)
        seed = self.cfg.seed_workspace or SEED_DEFAULT
        from ahe.agents import HARNESS_FILE, backend_name
        from ahe.agents.checks import check_harness_loads
        from ahe.rollout.scheduler import loads_harness

        backend = backend_name(seed, self.cfg.agent_backend)  # unknown, or not the seed's harness.yaml: one sentence
        if loads_harness(self.executor):
            check_harness_loads(seed, self.cfg.isolation, backend)  # a broken seed fails before anything is written
        # the backend is part of the harness's history: a config's choice is written into the seed commit
        extra = {HARNESS_FILE: f"backend: {backend}\n"} if backend != "ahe" and not (seed / HARNESS_FILE).exists() else None
        repo = HarnessRepo.create(self.run.workspace, seed, extra_files=extra)
        atomic_write_text(self.run.experiment_yaml, dump_experiment_config(self.cfg))
        self.run.save_state(LoopState())
        self.run.history(f"- {time.strftime('%Y-%m-%d %H:%M')} started `{self.cfg.name}`: seed {repo.head()[:10]} (tag iter-000), "
                         f"{self.cfg.iterations} iterations, k={self.cfg.k}, tasks {self.cfg.tasks}")
        return repo

    def context(self, repo: HarnessRepo) -> PhaseContext:
        """What the phases work with; a task source produces its folders here (idempotently)."""
        from ahe.tasks import load_tasks
        from ahe.tasks.snapshot import seal_tasks
        from ahe.tasks.sources import resolve_tasks

        tasks_dir = resolve_tasks(self.cfg.tasks, self.run.tasks_source)
        # verifiers are sealed before any harness code runs; a resumed run whose tasks changed refuses here
        seal_tasks(load_tasks(tasks_dir, include=self.cfg.include or None).tasks, self.run.sealed)
        from ahe.evolution.holdout import search_folder

        self._tasks_root = tasks_dir  # with `holdout:` every phase sees the search split only (ahe.evolution.holdout)
        self._split, search_dir = search_folder(self.cfg, tasks_dir, self.run)
        return PhaseContext(
            cfg=self.cfg, run=self.run, repo=repo, tasks_dir=search_dir,
            roles=self.roles, console=self.console, should_stop=lambda: self.stop_requested,
            executor=self.executor, evolve=self.evolve, elapsed=self._elapsed,
        )

    # ------------------------------------------------------------------ main
    async def run_loop(self, repo: HarnessRepo, role_urls: dict[str, str | None]) -> LoopState:
        for role in ("agent", "debugger", "evolve"):
            base: RoleConfig = getattr(self.cfg.models, role)
            url = role_urls.get(role)
            self.roles[role] = base.model_copy(update={"base_url": url, "model": base.model or "mock"}) if url else base
        # the explore agent: its own role when configured, else the evolve role's (and its mock)
        explore = self.cfg.models.explore or getattr(self.cfg.models, "evolve")
        url = role_urls.get("explore") or (None if self.cfg.models.explore else role_urls.get("evolve"))
        self.roles["explore"] = explore.model_copy(update={"base_url": url, "model": explore.model or "mock"}) if url else explore
        ctx = self.context(repo)
        self.bill.open(getattr(self, "_tasks_root", ctx.tasks_dir), self.forecast_from)
        owned = self._shared_executor(ctx)
        try:
            return await self._iterate(ctx)
        finally:
            if owned is not None:
                owned.close()

    def _shared_executor(self, ctx: PhaseContext) -> Any:
        """Under `executor: ray`, one executor for the whole run: its runners and the folders it
        shipped to the nodes outlive a rollout (a new one per rollout restarted the runners, 8–13 s)."""
        if ctx.executor is not None or self.cfg.executor != "ray":
            return None
        from ahe.evolution.phases import rollout_config
        from ahe.rollout.scheduler import make_executor

        ctx.executor = make_executor(rollout_config(ctx), ctx.should_stop)
        return ctx.executor

    async def _iterate(self, ctx: PhaseContext) -> LoopState:
        state = self.run.load_state()
        scores = self.run.load_scores()
        self._elapsed_before = state.elapsed_sec
        last = self.cfg.iterations + (1 if self.cfg.evaluate_final else 0)
        try:
            for it in range(1, last + 1):
                final = it > self.cfg.iterations
                phases = PHASES[:3] if final else PHASES
                for phase in phases:
                    if state.is_done(it, phase):
                        continue
                    ahead = None if final or phase != "debug" else budget_ahead(
                        self.cfg, scores, it, self._elapsed(), reserve_trials=trials_to_come(self.cfg, self._split, self.run),
                        search_allocates=self.cfg.search == "tree",
                        trials_spent=count_trials_spent(self.run) if self.cfg.budgets.max_trials else 0)
                    if ahead:
                        return await self._finish(ctx, state, ahead)
                    if phase in ("attribution", "rollback") and it == 1 or phase == "explore" and (
                            it != 1 or not self.cfg.explore.sources or state.is_done(it, "evolve")):
                        state.mark(it, phase)
                        continue
                    try:
                        await self._run_phase(ctx, it, phase, state, scores, final=final)
                    except BudgetSpent as spent:  # search: tree under a budget: no child affordable
                        return await self._finish(ctx, state, str(spent))
                    state.mark(it, phase)
                    state.elapsed_sec = self._elapsed()
                    self.run.save_state(state)
                    if self.stop_requested:
                        raise StopRequested()
                    self.bill.after_phase(scores, state, self._elapsed(), it, phase)
                    reason = self._budget_exceeded(scores, it, phase)
                    if reason:
                        return await self._finish(ctx, state, reason)
            return await self._finish(ctx, state, "finished all iterations")
        finally:
            state.elapsed_sec = self._elapsed()
            self.run.save_state(state)

    async def _finish(self, ctx: PhaseContext, state: LoopState, reason: str) -> LoopState:
        from ahe.evolution.holdout_phase import finish_holdout

        tree = self.cfg.search == "tree"
        if tree:  # the archive's finalists re-evaluated, `best` tagged (ahe.evolution.tree)
            from ahe.evolution.tree.finish import best_words, finish_tree

            await finish_tree(ctx, reason)
        await finish_holdout(ctx, self._split, state)  # best and the seed on the sealed held-out split, once
        state.stopped, state.finished = reason, True
        self.run.save_state(state)
        scores = self.run.load_scores()
        self.bill.close(scores, state, self._elapsed(), reason)
        best = _best_words(scores) if scores.best_iteration is not None else None
        best = (best_words(self.run) if tree else None) or best  # a tree run: its best node, not the line's best round
        self.run.history(f"- loop ended: {reason}" + (f"; best: {best}" if best else ""))
        self.run.event("loop_end", reason=reason)
        return state

    def _elapsed(self) -> float:
        return round(getattr(self, "_elapsed_before", 0.0) + time.monotonic() - self._t0, 3)

    # ------------------------------------------------------------------ phases
    async def _run_phase(self, ctx: PhaseContext, it: int, phase: str, state: LoopState, scores: Scores, *, final: bool) -> None:
        repo = ctx.repo
        key = f"{it:03d}/{phase}"
        if key in state.phase_base:  # a half-finished phase: back to where it started
            repo.discard_uncommitted()
            repo.repo.git.reset("--hard", "-q", state.phase_base[key])
        else:
            state.phase_base[key] = repo.head()
            self.run.save_state(state)
        self.run.event("phase_start", iteration=it, phase=phase)
        maybe_kill_self(key)
        self.console.print(f"[bold]iteration {it}{' (final evaluation)' if final else ''}[/] — {phase}")
        t0 = time.monotonic()
        if phase == "rollout":
            self._record_rollout(scores, it, await rollout_phase(ctx, it), repo, final=final)
        elif phase == "attribution":
            att = await attribution_phase(ctx, it)
            self._record_attribution(it, att)
            if att.reeval is not None:
                self._record_reeval(scores, it, att)
        elif phase == "rollback":
            self._record_rollback(scores, it, ctx.run.iteration(it).attribution(), rollback_phase(ctx, it))
            if self._best_later():
                await self._best_by_evidence(ctx, scores, it)
            if final:
                repo.tag("final")
        elif phase == "debug":
            self._add_usage(scores, it, phase, "debugger", await debug_phase(ctx, it))
        elif phase == "explore":
            outcome = await explore_phase(ctx, it)
            if outcome is not None:
                self._add_usage(scores, it, phase, "explore", outcome.usage)
                self._record_evolve(it, outcome, repo.head(), label="explore")
        elif phase == "evolve":
            outcome = await evolve_phase(ctx, it)
            self._add_usage(scores, it, phase, "evolve", outcome.usage)
            self._add_usage(scores, it, phase, "agent", outcome.variant_rollouts)
            self._add_usage(scores, it, phase, "variants", outcome.variant_rollouts)
            self._record_evolve(it, outcome, repo.head())
        else:
            raise AssertionError(f"unknown phase {phase!r}")
        took = round(time.monotonic() - t0, 3)
        score = scores.get(it)
        if score is not None:
            score.timings_sec[phase] = took
            scores.upsert(score)
            self.run.save_scores(scores)
        self.run.event("phase_end", iteration=it, phase=phase, duration_sec=took)

    def _record_rollout(self, scores: Scores, it: int, out: RolloutOutcome, repo: HarnessRepo, *, final: bool) -> None:
        results, commit, tag = out.results, out.commit, out.tag
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
            metric_value=run_score(results, self.cfg.metric),
            reward_means=dict(results.reward_means),
            benchmark_hash=results.benchmark_hash,
        )
        scores.upsert(score)
        scores.metric = self.cfg.metric
        value = score.metric_value
        if scores.best_metric_value is None and scores.best_iteration is not None and not self._best_later():
            scores.best_metric_value = scores.best_pass_at_1  # scores of an older AHE
        # by the evidence, H_best is chosen after the rollback (pass-rate evidence only)
        later = self._best_later() and scores.best_iteration is not None
        if not later and (scores.best_metric_value is None or value > scores.best_metric_value + 1e-12):
            scores.best_iteration, scores.best_commit, scores.best_pass_at_1 = it, commit, results.pass_at_1
            scores.best_metric_value = value
            repo.tag("best", commit)
        self.run.save_scores(scores)
        by = "" if self.cfg.metric == PASS_RATE else f", {metric_label(self.cfg.metric)} {value:.3f}"
        self.run.history(
            f"- iteration {it}: evaluated {tag} ({commit[:10]}): pass@1 {results.pass_at_1:.3f} "
            f"({results.n_passed}/{results.n_trials}), pass@{results.k} {results.pass_at_k:.3f}{by}, "
            f"infra errors {results.infra_errors}; best so far: {_best_words(scores)}"
        )

    def _record_attribution(self, it: int, att: Attribution) -> None:
        for v in att.changes:
            self.run.event("decision", iteration=it, change=v.change_id, verdict=v.verdict, reason=v.reason)
        fp, rp = att.fix_predictions, att.regression_predictions
        verdicts = ", ".join(f"{v.change_id} {v.verdict}" for v in att.changes) or "no changes to judge"
        self.run.history(
            f"  - attribution of iteration {it - 1}'s changes: {verdicts}; improved {att.improved or '-'}, "
            f"regressed {att.regressed or '-'}; fix precision {_pct(fp.precision)} recall {_pct(fp.recall)}, "
            f"regression precision {_pct(rp.precision)} recall {_pct(rp.recall)}"
            + (f" (agent ∪ replay: precision {_pct(up.precision)} recall {_pct(up.recall)})"
               if (up := att.union_regression_predictions) is not None else "")
        )
        for v in att.rejudged:  # changes of earlier iterations judged again (deferred ones; earlier keeps under expected-value)
            self.run.event("decision", iteration=it, change=v.change_id, change_iteration=v.change_iteration,
                           verdict=v.verdict, reason=v.reason)
            what = "deferred " if v.deferred_rounds else ""
            self.run.history(f"  - {what}{v.change_id} of iteration {v.change_iteration} judged again: {v.verdict} — {v.reason}")

    def _record_reeval(self, scores: Scores, it: int, att: Attribution) -> None:
        r = att.reeval
        score = scores.get(it)
        if r is None or score is None:
            return
        score.reeval_trials = r.spent  # set, not added: a redone phase counts its finished trials again
        score.tokens["reeval"], score.cost_usd["reeval"] = r.tokens, r.cost_usd
        scores.upsert(score)
        self.run.save_scores(scores)
        if r.spent:
            self.run.history(f"  - re-evaluation: {r.spent} extra trials (budget {r.budget}; {r.run_now} run now, "
                             f"{r.spent - r.run_now} found finished)")

    def _best_later(self) -> bool:
        """H_best by the pooled evidence (a `noise` policy) — that evidence is pass/fail counts."""
        return self.by_evidence and self.cfg.metric == PASS_RATE

    async def _best_by_evidence(self, ctx: PhaseContext, scores: Scores, it: int) -> None:
        """H_best without the winner's curse: the leader's lead must pass the evidence test,
        re-evaluating the two best harnesses when close (ahe.evolution.hbest)."""
        from ahe.evolution.hbest import choose_best, record

        best, est, decision = await choose_best(ctx, it, latest=self.best_is_latest)
        summary = record(self.run, it, decision)
        # where pass@1 stands, only a measured one: the round that evaluated exactly this harness, else none
        measured = next((s.pass_at_1 for s in scores.iterations if s.harness_commit == best.commit), None)
        scores.best_iteration, scores.best_commit, scores.best_pass_at_1 = best.round, best.commit, measured
        scores.best_metric_value = measured
        ctx.repo.tag("best", best.commit)
        score = scores.get(it)
        if score is not None and decision.spent:  # set, not added: a redone phase counts its finished trials again
            score.reeval_trials = summary.spent + decision.spent
            score.tokens["reeval"] = summary.tokens + decision.tokens
            score.cost_usd["reeval"] = summary.cost_usd + decision.cost_usd
            scores.upsert(score)
        self.run.save_scores(scores)
        lead = f"; P(lead) {decision.p_lead:.3f} over {(decision.runner_up or '')[:10]}" if decision.p_lead is not None else ""
        again = f"; {decision.spent} re-evaluation trials on {', '.join(decision.reeval_tasks)}" if decision.spent else ""
        self.run.history(f"  - best harness by the evidence: {_best_words(scores)}; its estimated pass@1 (posterior mean, "
                         f"not a score) {est:.3f}{lead}{again} — {decision.reason}")

    def _record_rollback(self, scores: Scores, it: int, att: Attribution | None, report: RollbackReport) -> None:
        score = scores.get(it)
        if score is not None and att is not None:
            score.kept = [v.change_id for v in att.changes if v.verdict != "rollback"]
            score.rolled_back = [r.change_id for r in report.rolled_back if r.revert_commit]
            scores.upsert(score)
            self.run.save_scores(scores)
        for r in report.rolled_back:
            self.run.event("rollback", iteration=it, change=r.change_id, commit=r.commit, revert_commit=r.revert_commit, error=r.error)
            what = f"reverted by {r.revert_commit[:10]} ({r.method})" if r.revert_commit else f"could not be reverted: {r.error}"
            self.run.history(f"  - rolled back {r.change_id} ({r.commit[:10]}): {r.reason}; {what}")

    def _record_evolve(self, it: int, outcome: EvolveOutcome, head: str, label: str = "evolve") -> None:
        manifest = outcome.manifest
        accepted = [c for c in manifest.changes if c.status == "accepted" and (label == "explore" or c.origin != "explore")]
        rejected = [c for c in manifest.changes if c.status == "rejected" and (label == "explore" or c.origin != "explore")]
        variants = [n for n in manifest.gate_notes if n.startswith("best of ")]
        self.run.history(
            f"  - {label}: {len(accepted)} change(s) accepted" + (f" ({variants[0]})" if variants else "")
            + "".join(f"\n    - {c.id} [{c.component}] {c.summary} — predicts fixes {c.predicted_fixes or '-'}, "
                      f"risks {c.predicted_regressions or '-'}, replay at risk {c.replay_at_risk or '-'} "
                      f"({(c.commit or '')[:10]})" for c in accepted)
            + (f"; {len(rejected)} rejected by the gate: " + ", ".join(f"{c.id} ({'; '.join(c.gate_errors)[:200]})" for c in rejected) if rejected else "")
            + (f"; harness tagged iter-{it:03d} ({head[:10]})" if label == "evolve" else f"; harness at {head[:10]}")
        )

    # ------------------------------------------------------------------ budgets
    def _add_usage(self, scores: Scores, it: int, phase: str, role: str, usage: Usage | None) -> None:
        """Iteration it's `phase` spent `usage` of `role` ("variants": the variants' part of the agent's),
        saved at once and counted once however often a kill makes the phase run again."""
        score = scores.get(it)
        if score is None or usage is None:
            return
        score.add_spend(phase, role, usage.total_tokens, float(usage.cost_usd or 0.0))
        scores.upsert(score)
        self.run.save_scores(scores)

    def _budget_exceeded(self, scores: Scores, it: int, phase: str) -> str | None:
        b = self.cfg.budgets
        tail = mid_round(self.run, it) if self.cfg.search == "tree" and phase == "evolve" else ""
        # a tree round that crossed the wall clock ends the run even if a kill lost some of its time
        if why := wall_clock_spent(b, self._elapsed()) or (clock_crossed(self.run, it) if tail else None):
            return why + tail
        if why := spent_budget(b, scores.totals()):
            return why + tail
        if b.max_trials is not None and (n := count_trials_spent(self.run)) >= b.max_trials:
            return f"trial budget ({b.max_trials:,}) reached: {n:,} trials run, {n - b.max_trials:,} over" + tail
        score = scores.get(it)
        if phase == "rollout" and b.target_pass_at_1 is not None and score and score.pass_at_1 >= b.target_pass_at_1:
            return f"target pass@1 {b.target_pass_at_1} reached at iteration {it}"
        return None


def _best_words(scores: Scores) -> str:
    """H_best in the words history, audit and report share: its round and what was measured on it."""
    commit = f" ({scores.best_commit[:10]})" if scores.best_commit else ""
    if scores.best_metric_value is not None:
        return f"iteration {scores.best_iteration}{commit}, {metric_label(scores.metric)} {scores.best_metric_value:.3f}" \
            if scores.metric != PASS_RATE else f"iteration {scores.best_iteration}{commit}, pass@1 {scores.best_metric_value:.3f}"
    return f"iteration {scores.best_iteration}{commit}, the harness its rollback left (no round evaluated it as it is)"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


@contextlib.contextmanager
def mock_endpoints(cfg: ExperimentConfig):
    """Start one scripted MOCK model server per role that names a policy."""
    from ahe.testing.endpoint import mock_endpoint

    with contextlib.ExitStack() as stack:
        urls = {
            role: stack.enter_context(mock_endpoint(getattr(cfg.mock_policies, role)))
            for role in ("agent", "debugger", "evolve", "explore")
        }
        yield urls


def run_evolution(cfg: ExperimentConfig, run_dir: Path, *, resume: bool, console: Console | None = None,
                  forecast_from: Path | None = None) -> LoopState:
    """Run (or resume) the loop; Ctrl-C once stops after the running trials, twice at once."""
    loop = EvolutionLoop(cfg, run_dir, console=console, forecast_from=forecast_from)
    always = Console(stderr=True, soft_wrap=True)  # what must be said even with --quiet
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
            always.print(escape(f"stopped; resume with: ahe evolve --resume {run_dir}"), highlight=False)
            return loop.run.load_state()
