"""`ahe eval`: k trials per task of one harness, with live progress and a results table."""

from __future__ import annotations

import asyncio
import json
import shlex
import signal
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape

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
    agent_backend: str | None = None,
) -> RunResults:
    get_backend(sandbox)  # an unknown backend: one sentence naming the registered ones
    if agent_backend is not None:  # unknown, or disagreeing with the harness's harness.yaml: one sentence now
        from ahe.agents import backend_name

        backend_name(workspace, agent_backend)
    if isolation not in ("auto", "bwrap", "none"):
        raise AheError(f"--isolation must be auto, bwrap or none, not {isolation!r}")
    if executor == "local":  # e.g. docker with no engine: one sentence now, not an error per trial
        from ahe.tasks.sandboxes import ready_backend

        ready_backend(sandbox, isolation)
    if executor not in ("local", "ray"):
        raise AheError(f"--executor must be local or ray, not {executor!r}")
    from ahe.rollout.ray_probe import check_ray_flags

    check_ray_flags(executor, ray_address)
    if executor == "ray":  # Ray missing or a wrong address: one sentence before anything starts or is written
        from ahe.rollout.ray_executor import connect

        connect(ray_address)
    console = Console(stderr=True, soft_wrap=True)  # whole lines in a log file
    out = out or Path("runs") / time.strftime("eval-%Y%m%d-%H%M%S")
    stop = Stop(console)
    try:
        settings = dict(workspace=workspace, include=include, k=k, concurrency=concurrency, sandbox=sandbox,
                        isolation=isolation, retry_infra=retry_infra, agent_timeout_sec=agent_timeout, keep_app=keep_app,
                        executor=executor, ray_address=ray_address, agent_backend=agent_backend)
        results = _run(settings, tasks=tasks, model=model, base_url=base_url, out=out, mock_policy=mock_policy,
                       json_out=json_out, console=console, stop=stop)
    except (KeyboardInterrupt, asyncio.CancelledError):
        results = None
    if results is None or (stop.requested and results.missing_trials):
        console.print(escape(stopped_sentence(out)), highlight=False)
        raise SystemExit(130)
    if json_out:
        print(json.dumps(json.loads(results.model_dump_json()), indent=2))
    else:
        from ahe.tables import TableOutput

        TableOutput("markdown" if fmt == "markdown" else "table").print(
            results_table(results, title=f"ahe eval — {workspace} on {tasks} (k={k})"))
        bench = f" (benchmark {results.benchmark_hash[:12]}, sealed in {out / 'sealed'})" if results.benchmark_hash else ""
        console.print(escape(f"results: {out / 'results.json'}{bench}"), highlight=False)
    return results


class Stop:
    """Ctrl-C once: running trials finish and no new one starts; twice: stop now."""

    def __init__(self, console: Console) -> None:
        self.console, self.requested, self.task = console, False, None

    def __call__(self) -> bool:
        return self.requested

    def on_sigint(self) -> None:
        if self.requested and self.task is not None:
            self.task.cancel()
            return
        self.requested = True
        self.console.print("[yellow]stopping: running trials finish, no new one starts (Ctrl-C again to stop now)[/]")


def _run(settings: dict, *, tasks: Path, model: str | None, base_url: str | None, out: Path, mock_policy: Path | None,
         json_out: bool, console: Console, stop: Stop) -> RunResults:
    """Plan and run the trials, with the mock server up if asked for; Ctrl-C goes to `stop`."""
    with mock_endpoint(mock_policy) as url:
        if url:
            console.print(escape(f"using the scripted MOCK model server at {url} (policy {mock_policy})"), style="yellow")
        from ahe.tasks.sources import resolve_tasks

        cfg = RolloutConfig(
            tasks_dir=resolve_tasks(tasks, out / "tasks-source"),
            agent_role=RoleConfig(model=model or ("mock" if url else None), base_url=url or base_url),
            **settings,
        )
        from ahe.llm import resolve_role

        resolve_role("agent", cfg.agent_role)  # a missing model fails now, not in every trial
        plan = plan_rollouts(cfg, out)
        for line in plan.skipped_tasks:
            console.print(f"[red]skipped broken task:[/] {escape(line)}", highlight=False)
        if plan.needs_docker:
            console.print(f"[yellow]skipped {len(plan.needs_docker)} task(s) that need Docker "
                          f"(run with --sandbox docker):[/] {escape(', '.join(plan.needs_docker))}", highlight=False)
        total = len(plan.specs)

        async def main(on_event=None) -> RunResults:
            stop.task = asyncio.current_task()
            try:
                asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.on_sigint)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread (a caller's own loop)
                pass
            return await run_rollouts(cfg, out, plan=plan, on_event=on_event, should_stop=stop)

        try:
            if json_out or total == 0:
                return asyncio.run(main())
            with Progress(total, cfg.concurrency, console, already_done=len(plan.done)) as progress:
                return asyncio.run(main(progress.on_event))
        except OSError as exc:
            raise_if_disk_full(exc, out)
            raise


def stopped_sentence(out: Path) -> str:
    """What a stopped run says: how far it got, and the exact command that carries on."""
    try:
        r = RunResults.model_validate_json((out / "results.json").read_text())
        done = f"{r.n_trials} of {r.n_trials + r.missing_trials} trials finished (results so far: {out / 'results.json'})"
    except (OSError, ValueError):
        done = "no trial finished"
    return f"stopped: {done}; resume with: {resume_command(out)}"


def resume_command(out: Path) -> str:
    """This command line again, with --out naming the run folder (a re-run skips finished trials)."""
    args = sys.argv[1:]
    if not args or args[0] != "eval":  # called from Python, not from the command line
        return f"ahe eval ... --out {shlex.quote(str(out))} (the same options, this output folder)"
    if not any(a == "--out" or a.startswith("--out=") for a in args):
        args = [*args, "--out", str(out)]
    return shlex.join(["ahe", *args])
