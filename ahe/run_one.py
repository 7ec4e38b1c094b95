"""`ahe run`: one session of a harness on one instruction or task, in the local sandbox."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ahe.errors import AheError
from ahe.testing.endpoint import mock_endpoint
from ahe.llm.types import RoleConfig


def run_one(
    *,
    workspace: Path,
    instruction: str | None,
    task_dir: Path | None,
    workdir: Path | None,
    out: Path | None,
    model: str | None,
    base_url: str | None,
    mock_policy: Path | None,
    isolation: str,
    timeout: float | None,
    verify: bool,
    agent_backend: str | None = None,
) -> dict:
    from ahe.agents.checks import check_harness_loads

    console = Console(stderr=True, soft_wrap=True)  # whole lines in a log file
    task = _load_task(task_dir, workdir, isolation)
    check_harness_loads(workspace, isolation, agent_backend)  # loaded in a worker, never here
    if task is not None:
        instruction = task.instruction
        timeout = task.agent_timeout_sec if timeout is None else timeout
    out = out or Path("runs") / time.strftime("run-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    if task is None:
        workdir = workdir or out / "app"
        workdir.mkdir(parents=True, exist_ok=True)

    with mock_endpoint(mock_policy) as url:
        if url:
            console.print(escape(f"using the scripted MOCK model server at {url} (policy {mock_policy})"), style="yellow")
        cfg = RoleConfig(model=model or ("mock" if url and not model else None), base_url=url or base_url)
        summary = asyncio.run(_run_session(workspace, cfg, task, instruction or "", out, workdir, isolation, timeout, verify,
                                           agent_backend))
    (out / "result.json").write_text(json.dumps(summary, indent=2) + "\n")
    _print_summary(console, summary)
    return summary


def _load_task(task_dir: Path | None, workdir: Path | None, isolation: str) -> Any:
    """The task of --task (None without one), after the checks of the options that go with it."""
    task = None
    if task_dir is not None:
        from ahe.tasks import load_task

        task = load_task(task_dir)
    if task is not None and workdir is not None:
        raise AheError("--workdir cannot be combined with --task: the task's environment/ becomes <out>/app")
    if task is not None and task.runs_on != "local":
        raise AheError(f"--task {task_dir}: needs a Docker image; `ahe run` uses the local sandbox (try `ahe eval --sandbox docker`)")
    if isolation not in ("auto", "bwrap", "none"):
        raise AheError(f"--isolation must be auto, bwrap or none, not {isolation!r}")
    return task


async def _run_session(workspace: Path, cfg: RoleConfig, task: Any, instruction: str, out: Path, workdir: Path | None,
                       isolation: str, timeout: float | None, verify: bool, agent_backend: str | None = None) -> dict:
    """Sandbox up, the task's setup, the session (the harness's code in a confined worker, as in
    every rollout: docs/confinement.md), the verifier (with --verify), sandbox down: result.json's content."""
    from ahe.agents import AgentRequest, harness_backend
    from ahe.llm import make_client

    client = make_client("agent", cfg)
    sandbox = _make_sandbox(task, out, workdir, isolation)
    await sandbox.start()
    try:
        if task is not None:
            from ahe.tasks import run_setup

            await run_setup(task, sandbox)
        backend = harness_backend(workspace, agent_backend)
        try:
            result = await backend.run(AgentRequest(harness=workspace, instruction=instruction, trace_dir=out,
                                                    client=client, sandbox=sandbox, isolation=isolation,  # type: ignore[arg-type]
                                                    wall_clock_sec=timeout))
        finally:
            await backend.aclose()
        summary = json.loads(result.model_dump_json())
        if task is not None and verify:
            from ahe.tasks import run_verifier

            vr = await run_verifier(task, sandbox, out / "verifier")
            summary["verifier"] = json.loads(vr.model_dump_json())
    finally:
        await sandbox.stop()
    return summary


def _make_sandbox(task: Any, out: Path, workdir: Path | None, isolation: str) -> Any:
    """The task's local sandbox (its environment/ copied to <out>/app), or one on --workdir."""
    if task is not None:
        from ahe.tasks.sandboxes import make_local_sandbox

        return make_local_sandbox(task, out, isolation=isolation)
    from ahe.sandbox.local import LocalSandbox

    return LocalSandbox(workdir, root_dir=out / "root", isolation=isolation)  # type: ignore[arg-type]


def _print_summary(console: Console, summary: dict) -> None:
    """How the session ended (and the verifier's verdict) on stderr; the trajectory's path on stdout."""
    console.print(
        f"session ended: [bold]{summary['stop_reason']}[/] after {summary['turns']} turns, "
        f"{summary['usage']['prompt_tokens']}+{summary['usage']['completion_tokens']} tokens"
    )
    if summary.get("stop_reason") == "infra_error" and summary.get("detail"):
        console.print(escape(f"error: {summary['detail']}"), style="red")
    if "verifier" in summary:
        v = summary["verifier"]
        console.print(escape(f"verifier: reward={v.get('reward')} passed={v.get('passed')} {v.get('error') or ''}"))
    print(summary["trajectory_path"])
