"""`ahe run`: one session of a harness on one instruction or task, in the local sandbox."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from rich.console import Console

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
) -> dict:
    from ahe.llm import make_client
    from ahe.confine.host import ConfinedSessionSpec, check_workspace_loads, run_confined_session
    from ahe.sandbox.local import LocalSandbox

    console = Console(stderr=True, soft_wrap=True)  # whole lines in a log file
    task = None
    if task_dir is not None:
        from ahe.tasks import load_task

        task = load_task(task_dir)
        instruction = task.instruction
        if timeout is None:
            timeout = task.agent_timeout_sec
    if task is not None and workdir is not None:
        raise AheError("--workdir cannot be combined with --task: the task's environment/ becomes <out>/app")
    if task is not None and task.runs_on != "local":
        raise AheError(f"--task {task_dir}: needs a Docker image; `ahe run` uses the local sandbox (try `ahe eval --sandbox docker`)")
    if isolation not in ("auto", "bwrap", "none"):
        raise AheError(f"--isolation must be auto, bwrap or none, not {isolation!r}")
    check_workspace_loads(workspace, isolation)  # type: ignore[arg-type]  # a broken harness fails first
    out = out or Path("runs") / time.strftime("run-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    if task is None:
        workdir = workdir or out / "app"
        workdir.mkdir(parents=True, exist_ok=True)

    async def go(url: str | None) -> dict:
        cfg = RoleConfig(model=model or ("mock" if url and not model else None), base_url=url or base_url)
        client = make_client("agent", cfg)
        if task is not None:
            from ahe.tasks.sandboxes import make_local_sandbox

            sandbox = make_local_sandbox(task, out, isolation=isolation)
        else:
            sandbox = LocalSandbox(workdir, root_dir=out / "root", isolation=isolation)  # type: ignore[arg-type]
        await sandbox.start()
        try:
            if task is not None:
                from ahe.tasks import run_setup

                await run_setup(task, sandbox)
            # the harness's code runs in a confined worker, as in every rollout (docs/confinement.md)
            result = await run_confined_session(workspace, ConfinedSessionSpec(
                instruction=instruction or "", trace_dir=out, wall_clock_sec=timeout), client, sandbox,
                mode=isolation)  # type: ignore[arg-type]
            summary = json.loads(result.model_dump_json())
            if task is not None and verify:
                from ahe.tasks import run_verifier

                vr = await run_verifier(task, sandbox, out / "verifier")
                summary["verifier"] = json.loads(vr.model_dump_json())
        finally:
            await sandbox.stop()
        return summary

    with mock_endpoint(mock_policy) as url:
        if url:
            console.print(f"[yellow]using the scripted MOCK model server at {url} (policy {mock_policy})[/]")
        summary = asyncio.run(go(url))
    (out / "result.json").write_text(json.dumps(summary, indent=2) + "\n")
    console.print(
        f"session ended: [bold]{summary['stop_reason']}[/] after {summary['turns']} turns, "
        f"{summary['usage']['prompt_tokens']}+{summary['usage']['completion_tokens']} tokens"
    )
    if "verifier" in summary:
        v = summary["verifier"]
        console.print(f"verifier: reward={v.get('reward')} passed={v.get('passed')} {v.get('error') or ''}")
    print(summary["trajectory_path"])
    return summary
