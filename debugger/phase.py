"""The debug phase of one iteration: corpus → facts → per-task reports → overview.

`run_debug_phase` is what the evolution loop calls after the rollouts of an iteration (and
what `ahe debug` runs). It never fails the run: a model that is unreachable, answers
garbage or submits nothing leaves reports built from the facts, marked as such; only an
iteration folder without `rollouts/` is refused (bad input). Everything it writes is
written atomically; `analysis/debug_summary.json`, written last, marks the phase finished.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, Field

from ahe.errors import AheError
from ahe.llm.types import RoleConfig
from ahe.llm.usage import UsageLedger
from ahe.io import atomic_write_json, atomic_write_text
from debugger.agent import AGGREGATOR, DebugLimits, analyse_task, analysis_order, load_debugger
from debugger.clean import CleanConfig
from debugger.corpus import build_corpus
from debugger.facts import build_facts
from debugger.overview import Overview, fallback_overview, model_overview, render_overview
from debugger.report import TaskAnalysis, fallback_analysis, render_markdown

log = logging.getLogger(__name__)
SUMMARY_FILE = "debug_summary.json"
USAGE_FIELDS = ("calls", "failed_calls", "attempts", "prompt_tokens", "completion_tokens", "cached_tokens",
                "reasoning_tokens", "total_tokens", "cost_usd", "latency_sec")


class DebugSummary(BaseModel):
    """What the phase did; also written to analysis/debug_summary.json."""

    iteration_dir: str
    tasks: int = 0
    trials: int = 0
    steps: int = 0
    corpus_files: int = 0
    raw_bytes: int = 0
    corpus_bytes: int = 0
    raw_tokens: int = 0  # estimated: bytes / 4, as the runtime estimates
    corpus_tokens: int = 0
    compression: float = 0.0  # raw_tokens / corpus_tokens
    corpus_seconds: float = 0.0
    corpus_mb_per_sec: float = 0.0
    corpus_workers: int = 1
    cleaning: dict[str, int] = Field(default_factory=dict)
    analysis_order: list[str] = Field(default_factory=list)
    reports_written: int = 0
    agent_reports: int = 0
    fallbacks: int = 0
    fallback_reasons: dict[str, str] = Field(default_factory=dict)
    broken_citations: int = 0  # in the task reports
    overview_source: str | None = None
    overview_patterns: int = 0
    overview_broken_citations: int = 0
    debugger_tokens: int = 0
    usage: dict[str, Any] = Field(default_factory=dict)  # the debugger role's calls, tokens, cost (flat)
    warnings: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    duration_sec: float = 0.0

    def corpus_line(self) -> str:
        return (f"corpus: {self.tasks} tasks, {self.trials} trials, {self.steps:,} steps; tokens {self.raw_tokens:,} raw → "
                f"{self.corpus_tokens:,} in the corpus (raw/corpus ×{self.compression:.1f}); "
                f"{self.raw_bytes / 1e6:.1f} MB in {self.corpus_seconds:.2f} s ({self.corpus_mb_per_sec:.0f} MB/s)")


def _write_report(iteration_dir: Path, a: TaskAnalysis, task_facts: dict[str, Any]) -> None:
    d = iteration_dir / "analysis" / "tasks"
    atomic_write_json(d / f"{a.task}.json", a.model_dump())
    atomic_write_text(d / f"{a.task}.md", render_markdown(a, task_facts))


async def run_debug_phase(
    iteration_dir: Path,
    *,
    previous_dir: Path | None,
    role: RoleConfig | None = None,
    concurrency: int = 4,
    limits: DebugLimits | None = None,
    use_agent: bool = True,
    clean_config: CleanConfig | None = None,
    ledger: Any = None,
    client: Any = None,
    workers: int | None = None,
    on_report: Callable[[TaskAnalysis], None] | None = None,
) -> DebugSummary:
    """Corpus, facts, task reports and overview for one iteration folder (see docs/debugger.md).

    `role` configures the debugger's endpoint (`ahe.llm.make_client("debugger", role)`);
    `client` may be given instead (it is then not closed here). `use_agent=False` writes the
    corpus, the facts and facts-based reports and overview without any model call.
    """
    t0 = time.monotonic()
    iteration_dir = Path(iteration_dir).resolve()
    if not (iteration_dir / "rollouts").is_dir():
        raise AheError(f"{iteration_dir}: no rollouts/ folder — give an iteration folder (runs/<exp>/iterations/NNN) "
                       "or an `ahe eval` output folder")
    summary = DebugSummary(iteration_dir=str(iteration_dir))
    ledger = ledger if ledger is not None else UsageLedger()
    try:
        await _run(summary, iteration_dir, previous_dir=previous_dir, role=role, concurrency=concurrency,
                   limits=limits or DebugLimits(), use_agent=use_agent, clean_config=clean_config, ledger=ledger,
                   client=client, workers=workers, on_report=on_report)
    except Exception as exc:  # the phase never fails the run: say what broke and go on
        log.exception("debug phase failed")
        summary.errors.append(f"the debug phase stopped early: {type(exc).__name__}: {exc}"[:500])
    if hasattr(ledger, "snapshot"):
        row = dict(ledger.snapshot().get("debugger") or {})
        summary.usage = {k: row.get(k, 0) for k in USAGE_FIELDS}
    summary.duration_sec = round(time.monotonic() - t0, 3)
    try:
        atomic_write_json(iteration_dir / "analysis" / SUMMARY_FILE, summary.model_dump())
    except OSError as exc:
        summary.errors.append(f"could not write {SUMMARY_FILE}: {exc}")
    return summary


def _record_corpus(summary: DebugSummary, build: Any) -> None:
    summary.tasks = len(build.tasks)
    summary.trials = sum(len(o["trials"]) for o in build.tasks)
    summary.steps, summary.corpus_files = build.steps, build.files
    summary.raw_bytes, summary.corpus_bytes = build.raw_bytes, build.corpus_bytes
    summary.raw_tokens, summary.corpus_tokens = build.raw_tokens, build.corpus_tokens
    summary.compression = round(build.ratio, 3)
    summary.corpus_seconds, summary.corpus_mb_per_sec = round(build.seconds, 3), round(build.mb_per_sec, 1)
    summary.corpus_workers, summary.cleaning = build.workers, build.clean
    summary.errors.extend(build.errors[:50])
    log.info(summary.corpus_line())


def _start_agent(summary: DebugSummary, *, use_agent: bool, client: Any, role: RoleConfig | None, ledger: Any,
                 limits: DebugLimits) -> tuple[Any, Any, str | None]:
    """(debugger agent, model client, why there is no agent): a broken start means facts only."""
    if not use_agent:
        return None, client, "the debugger agent was not run (no-agent mode)"
    try:
        if client is None:
            from ahe.llm import make_client

            client = make_client("debugger", role or RoleConfig(), ledger)
        return load_debugger(limits), client, None
    except Exception as exc:  # no model configured, broken workspace: facts only
        why = f"the debugger could not start: {exc}"[:300]
        summary.warnings.append(why)
        return None, client, why


async def _write_overview(summary: DebugSummary, ordered: list[TaskAnalysis], facts: dict[str, Any], iteration_dir: Path,
                          *, agent: Any, client: Any, limits: DebugLimits, use_agent: bool, no_agent: str | None,
                          spent: dict[str, int]) -> None:
    """overview.json/.md: the model's clustering of the reports, else the deterministic grouping."""
    analysis_dir = iteration_dir / "analysis"
    overview: Overview | None = None
    reason = no_agent or "the model aggregation is turned off"
    failing = [a for a in ordered if a.task_outcome in ("fail", "partial")]
    if not failing:
        reason = "nothing to cluster: no task failed a trial"
    elif agent is not None and client is not None and limits.aggregate_with_model:
        try:
            from ahe.runtime import load_agent

            agg = load_agent(AGGREGATOR)
            overview, reason, tokens = await model_overview(agg, client, ordered, facts, iteration_dir,
                                                            limits.wall_clock_sec)
            spent["tokens"] += tokens
        except Exception as exc:
            overview, reason = None, f"the aggregation failed: {type(exc).__name__}: {exc}"[:300]
    if overview is None:
        overview = fallback_overview(ordered, facts, iteration_dir / "corpus", reason or "no model overview")
        if failing and use_agent and agent is not None:
            summary.warnings.append(f"overview fell back to the deterministic grouping: {reason}")
    atomic_write_json(analysis_dir / "overview.json", overview.model_dump(by_alias=True))
    atomic_write_text(analysis_dir / "overview.md", render_overview(overview, facts, ordered))
    summary.overview_source = overview.source
    summary.overview_patterns = len(overview.patterns)
    summary.overview_broken_citations = overview.broken_citations


async def _run(summary: DebugSummary, iteration_dir: Path, *, previous_dir: Path | None, role: RoleConfig | None,
               concurrency: int, limits: DebugLimits, use_agent: bool, clean_config: CleanConfig | None,
               ledger: Any, client: Any, workers: int | None,
               on_report: Callable[[TaskAnalysis], None] | None) -> None:
    analysis_dir = iteration_dir / "analysis"
    (analysis_dir / "tasks").mkdir(parents=True, exist_ok=True)
    (analysis_dir / SUMMARY_FILE).unlink(missing_ok=True)  # the phase is not finished until it is rewritten

    build = await asyncio.to_thread(build_corpus, iteration_dir, config=clean_config, workers=workers)
    _record_corpus(summary, build)

    if previous_dir is not None and not Path(previous_dir).is_dir():
        summary.warnings.append(f"previous iteration {previous_dir} does not exist; no flips computed")
        previous_dir = None
    facts = build_facts(build.tasks, iteration_dir=iteration_dir, previous_dir=previous_dir)
    atomic_write_json(analysis_dir / "facts.json", facts)
    tasks_facts: dict[str, dict[str, Any]] = facts["tasks"]
    order = analysis_order(tasks_facts)
    summary.analysis_order = order
    corpus_root = iteration_dir / "corpus"

    given_client = client
    agent, client, no_agent = _start_agent(summary, use_agent=use_agent, client=client, role=role, ledger=ledger,
                                           limits=limits)
    own_client = client is not None and client is not given_client

    analyses: dict[str, TaskAnalysis] = {}
    spent = {"tokens": 0}
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(position: int, task: str) -> None:
        tf = tasks_facts[task]
        reason = no_agent
        a = None
        if reason is None and limits.max_tasks is not None and position > limits.max_tasks:
            reason = f"not analysed: over the limit of {limits.max_tasks} task(s) per phase"
        if reason is None:
            async with sem:  # FIFO: tasks start in the analysis order
                if limits.max_total_tokens is not None and spent["tokens"] >= limits.max_total_tokens:
                    reason = f"not analysed: the phase's token budget ({limits.max_total_tokens:,}) was spent"
                else:
                    a, reason, info = await analyse_task(agent, client, task=task, task_facts=tf,
                                                         iteration_dir=iteration_dir, limits=limits, order=position)
                    spent["tokens"] += info.get("tokens", 0)
        if a is None:
            a = fallback_analysis(task, tf, corpus_root, reason or "no report")
            a.order = position
        a.task_outcome = tf.get("outcome", "unknown")
        try:
            _write_report(iteration_dir, a, tf)
        except OSError as exc:
            summary.errors.append(f"could not write the report of {task}: {exc}")
        analyses[task] = a
        if on_report is not None:
            on_report(a)

    try:
        await asyncio.gather(*(one(i, t) for i, t in enumerate(order, 1)))
        for stale in (analysis_dir / "tasks").glob("*.*"):  # reports of tasks no longer in the iteration
            if stale.stem not in tasks_facts and stale.suffix in (".md", ".json"):
                stale.unlink(missing_ok=True)
        ordered = [analyses[t] for t in order if t in analyses]
        summary.reports_written = len(ordered)
        summary.agent_reports = sum(1 for a in ordered if a.source == "agent")
        summary.fallbacks = len(ordered) - summary.agent_reports
        summary.fallback_reasons = {a.task: a.fallback_reason or "" for a in ordered if a.source == "fallback"}
        summary.broken_citations = sum(a.broken_citations for a in ordered)
        if summary.fallbacks and use_agent:
            summary.warnings.append(f"{summary.fallbacks} of {len(ordered)} task report(s) fell back to the facts")

        await _write_overview(summary, ordered, facts, iteration_dir, agent=agent, client=client, limits=limits,
                               use_agent=use_agent, no_agent=no_agent, spent=spent)
    finally:
        if own_client and client is not None:
            try:
                await client.aclose()
            except Exception:  # closing must not hide the result
                pass
    summary.debugger_tokens = spent["tokens"]
