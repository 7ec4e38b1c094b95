"""`ahe debug`: the debug phase for one iteration folder, or for traces made elsewhere."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ahe.errors import AheError, ConfigError
from ahe.llm.types import RoleConfig


def default_previous(iteration_dir: Path) -> Path | None:
    """iterations/003 → iterations/002 when it exists."""
    m = re.fullmatch(r"\d+", iteration_dir.name)
    if not m:
        return None
    n = int(iteration_dir.name) - 1
    if n < 0:
        return None
    prev = iteration_dir.parent / f"{n:0{len(iteration_dir.name)}d}"
    return prev if (prev / "rollouts").is_dir() or (prev / "results.json").is_file() else None


def run_debug_command(*, iteration: Path | None, traces: Path | None, fmt: str, out: Path | None,
                      previous: Path | None, model: str | None, base_url: str | None, mock_policy: Path | None,
                      concurrency: int, no_agent: bool, max_turns: int | None, max_tokens: int | None,
                      timeout: float | None, json_out: bool) -> int:
    from ahe.testing.endpoint import mock_endpoint
    from debugger.agent import DebugLimits
    from debugger.phase import run_debug_phase

    err = Console(stderr=True)
    if (iteration is None) == (traces is None):
        raise AheError("give exactly one of ITERATION_DIR or --traces DIR (with --format atif|nexau|openai)")
    if traces is not None:
        from debugger.importers import import_traces

        target = out or Path("runs") / time.strftime("debug-%Y%m%d-%H%M%S")
        manifest = import_traces(traces, fmt, target)
        err.print(escape(f"imported {len(manifest['traces'])} {fmt} trace(s) from {traces} into {target / 'rollouts'}"))
        for e in manifest["errors"][:10]:
            err.print(f"[yellow]skipped:[/] {escape(str(e))}", highlight=False)
    else:
        if out is not None:
            raise AheError("--out goes with --traces; the phase of an iteration folder writes into that folder")
        target = iteration  # type: ignore[assignment]
        if not target.is_dir():
            raise AheError(f"{target}: no such folder")
        if previous is None:
            previous = default_previous(target.resolve())
    if previous is not None and not previous.is_dir():
        raise AheError(f"--previous {previous}: no such folder")
    limits = DebugLimits()
    updates = {k: v for k, v in (("max_turns", max_turns), ("max_tokens_per_task", max_tokens), ("wall_clock_sec", timeout)) if v}
    limits = limits.model_copy(update=updates)
    with mock_endpoint(mock_policy if not no_agent else None) as url:
        if url:
            err.print(escape(f"using the scripted MOCK model server at {url} (policy {mock_policy})"), style="yellow")
        role = RoleConfig(model=model or ("mock" if url else None), base_url=url or base_url)
        if not no_agent:
            from ahe.llm import resolve_role

            try:
                resolve_role("debugger", role)
            except ConfigError as exc:
                raise AheError(f"{exc} Or pass --model, or --no-agent for facts-only reports.") from None

        def progress(a) -> None:  # noqa: ANN001
            what = (f"agent report, {len(a.evidence)} citation(s), {a.broken_citations} broken" if a.source == "agent"
                    else f"[yellow]fallback[/]: {escape(str(a.fallback_reason))}")
            err.print(f"  {escape(f'[{a.order}] {a.task} ({a.task_outcome})')} — {what}", highlight=False)

        summary = asyncio.run(run_debug_phase(target, previous_dir=previous, role=role, concurrency=concurrency,
                                              limits=limits, use_agent=not no_agent, on_report=progress))
    if json_out:
        print(json.dumps(summary.model_dump(), indent=2))
    else:
        analysis = Path(summary.iteration_dir) / "analysis"
        c = Console()
        c.print(escape(summary.corpus_line()), highlight=False)
        cl = summary.cleaning
        c.print(f"cleaning: {cl.get('deduplicated', 0)} repeated outputs referenced, {cl.get('blobs', 0)} base64 blobs and "
                f"{cl.get('binary', 0)} binary outputs dropped, {cl.get('truncated', 0)} long texts cut", highlight=False)
        c.print(f"reports: {summary.reports_written} ({summary.agent_reports} by the debugger agent, {summary.fallbacks} from facts); "
                f"broken citations: {summary.broken_citations}; overview: {summary.overview_patterns} pattern(s) "
                f"({summary.overview_source})", highlight=False)
        c.print(escape(f"written: {analysis / 'facts.json'}, {analysis / 'tasks'}/, {analysis / 'overview.md'}"), highlight=False)
    for w in summary.warnings:
        err.print(f"[yellow]warning:[/] {escape(str(w))}", highlight=False)
    for e in summary.errors[:20]:
        err.print(f"[red]problem:[/] {escape(str(e))}", highlight=False)
    return 0
