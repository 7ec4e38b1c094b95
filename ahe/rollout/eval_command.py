"""`ahe eval`: k trials per task of one harness, with live progress and a results table."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from rich.console import Console

from ahe.errors import AheError, raise_if_disk_full
from ahe.sandbox.registry import get_backend
from ahe.llm.types import RoleConfig
from ahe.rollout.display import Progress, results_table
from ahe.rollout.models import RunResults
from ahe.rollout.scheduler import RolloutConfig, plan_rollouts, run_rollouts
from ahe.testing.endpoint import mock_endpoint


def run_eval(
    *,
    workspace: Path,
    tasks: Path,
    k: int,
    concurrency: int,
    include: list[str],
    out: Path | None,
    model: str | None,
    base_url: str | None,
    mock_policy: Path | None,
    sandbox: str,
    isolation: str,
    retry_infra: int,
    agent_timeout: float | None,
    keep_app: bool,
    json_out: bool,
    executor: str = "local",
    ray_address: str | None = None,
    fmt: str = "table",
) -> RunResults:
    get_backend(sandbox)  # an unknown backend: one sentence naming the registered ones
    if isolation not in ("auto", "bwrap", "none"):
        raise AheError(f"--isolation must be auto, bwrap or none, not {isolation!r}")
    if executor not in ("local", "ray"):
        raise AheError(f"--executor must be local or ray, not {executor!r}")
    console = Console(stderr=True, soft_wrap=True)  # whole lines in a log file
    out = out or Path("runs") / time.strftime("eval-%Y%m%d-%H%M%S")
    with mock_endpoint(mock_policy) as url:
        if url:
            console.print(f"[yellow]using the scripted MOCK model server at {url} (policy {mock_policy})[/]")
        from ahe.tasks.sources import resolve_tasks

        cfg = RolloutConfig(
            tasks_dir=resolve_tasks(tasks, out / "tasks-source"),
            workspace=workspace,
            include=include,
            k=k,
            concurrency=concurrency,
            agent_role=RoleConfig(model=model or ("mock" if url else None), base_url=url or base_url),
            sandbox=sandbox,  # type: ignore[arg-type]
            isolation=isolation,  # type: ignore[arg-type]
            retry_infra=retry_infra,
            agent_timeout_sec=agent_timeout,
            keep_app=keep_app,
            executor=executor,  # type: ignore[arg-type]
            ray_address=ray_address,
        )
        from ahe.llm import resolve_role

        resolve_role("agent", cfg.agent_role)  # a missing model fails now, not in every trial
        plan = plan_rollouts(cfg, out)
        for line in plan.skipped_tasks:
            console.print(f"[red]skipped broken task:[/] {line}")
        if plan.needs_docker:
            console.print(f"[yellow]skipped {len(plan.needs_docker)} task(s) that need Docker "
                          f"(run with --sandbox docker):[/] {', '.join(plan.needs_docker)}")
        total = len(plan.specs)
        try:
            if json_out or total == 0:
                results = asyncio.run(run_rollouts(cfg, out, plan=plan))
            else:
                with Progress(total, concurrency, console, already_done=len(plan.done)) as progress:
                    results = asyncio.run(run_rollouts(cfg, out, plan=plan, on_event=progress.on_event))
        except OSError as exc:
            raise_if_disk_full(exc, out)
            raise
    if json_out:
        print(json.dumps(json.loads(results.model_dump_json()), indent=2))
    else:
        from ahe.tables import TableOutput

        TableOutput("markdown" if fmt == "markdown" else "table").print(
            results_table(results, title=f"ahe eval — {workspace} on {tasks} (k={k})"))
        bench = f" (benchmark {results.benchmark_hash[:12]}, sealed in {out / 'sealed'})" if results.benchmark_hash else ""
        console.print(f"results: {out / 'results.json'}{bench}")
    return results
