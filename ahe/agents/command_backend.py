"""The `command` backend: any command-line agent, run inside the trial's sandbox behind the gateway.

The harness folder holds the files the CLI reads (AGENTS.md, skills, settings, hooks, MCP lists)
and a harness.yaml saying how to start it (command_config.py). Per trial:

1. the gateway's OpenAI face listens on a unix socket in a folder the sandbox shares with the
   host (`sandbox.channel()`); a forwarder inside the sandbox's own network namespace gives the
   CLI `http://127.0.0.1:PORT/v1` and a dummy key. The sandbox has no network, so the gateway
   is the only thing the CLI reaches; the real key never leaves the host's client;
2. the harness folder is copied to /tmp/ahe-harness, its `files` to where the CLI reads them,
   its `config_files` rendered; the instruction is written to a file;
3. the command runs (bash, in the sandbox, the trial's wall clock as its timeout);
4. usage and the conversation are the gateway's; the trajectory is the CLI's own file (ATIF or an
   OpenAI message log), or rebuilt from the gateway's record when it wrote none or a bad one.

A CLI that is missing, exits at once, or never reaches the model ends its trial as one sentence
(an infrastructure error of kind `agent_command`), never as a crash of the loop.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import time
from pathlib import Path
from typing import Any

from ahe.agents.base import AgentRequest, BackendBase, Component
from ahe.agents.command_config import (
    DUMMY_KEY, HARNESS_DIR, CommandSettings, command_components, read_command_settings, render,
)
from ahe.agents.command_trajectory import count_tool_calls, parse_trajectory, trajectory_from_conversation
from ahe.confine.gateway import CONVERSATION_FILE, GatewayBudget, ModelGateway
from ahe.confine.host import ConfineMode
from ahe.confine.openai_face import OpenAIFace
from ahe.errors import AheError
from ahe.io import atomic_write_json
from ahe.runtime import SessionResult, StopReason
from ahe.runtime.trace import EventLog
from ahe.sandbox.bwrap import jail_python
from ahe.tempdirs import temp_dir

FORWARDER = Path(__file__).resolve().parents[1] / "confine" / "forwarder.py"
SOCKET = "gateway.sock"
INSTRUCTION_FILE = "/tmp/ahe-instruction.md"
FORWARDER_WAIT_SEC = 15.0
DEFAULT_WALL_CLOCK_SEC = 1800.0


class CommandFailure(AheError):
    """The agent's command could not run as a session: one sentence for the trial."""


class CommandBackend(BackendBase):
    name = "command"
    summary = "any command-line agent (AGENTS.md, skills, hooks, settings...) run in the sandbox behind the gateway"
    replayable = False  # its tools are the CLI's own: recorded tool calls cannot be re-run against it

    def protected_keys(self, settings: dict[str, Any]) -> dict[str, list[str]]:
        # the sampling the gateway passes on, the request budget and the model asked for stay the user's
        return {"harness.yaml": ["llm", "max_requests", "model"]}

    def components(self, harness: Path) -> list[Component]:
        return command_components(Path(harness))

    async def load_problem(self, harness: Path, isolation: ConfineMode = "auto") -> str | None:
        try:
            read_command_settings(Path(harness))
        except AheError as exc:
            return str(exc)
        return None

    async def run(self, request: AgentRequest) -> SessionResult:
        t0 = time.monotonic()
        events = EventLog(request.trace_dir / "events.jsonl")
        gateway = face = None
        try:
            settings = read_command_settings(request.harness)
            budget = request.budget or GatewayBudget(
                max_requests=settings.max_requests, llm_settings=(settings.llm,) if settings.llm else ())
            gateway = ModelGateway(request.client, record_dir=request.trace_dir, budget=budget)
            host_dir, inside_dir = _channel(request.sandbox)
            model = settings.model or getattr(request.client, "model", None) or "ahe-agent"
            face = OpenAIFace(gateway, host_dir / SOCKET, model=model)
            await face.start()
            sandbox = request.sandbox
            port = await _start_forwarder(sandbox, inside_dir)
            values = await _place_harness(sandbox, request, settings, base_url=f"http://127.0.0.1:{port}/v1",
                                          model=model)
            events.emit("agent_command", command=values["command"])
            res = await _run_command(sandbox, values, settings, request, gateway)
        except CommandFailure as exc:
            res = _failure(str(exc))
        except AheError as exc:  # harness.yaml broken at this commit, a template that does not render
            res = _failure(str(exc))
        finally:
            if face is not None:
                await face.close()
            if gateway is not None:
                gateway.close()
        res.usage = gateway.usage if gateway is not None else res.usage
        res.duration_sec = round(time.monotonic() - t0, 4)
        note = await _write_trajectory(request, res)
        if note:
            events.emit("trajectory_rebuilt", reason=note)
        if gateway is not None and gateway.refusals:
            events.emit("gateway_refusals", count=len(gateway.refusals), first=gateway.refusals[0])
        events.close()
        return res


def _failure(detail: str) -> SessionResult:
    return SessionResult(session_id="command", agent="command", stop_reason=StopReason.infra_error,
                         detail=detail, infra_error_kind="agent_command")


def _channel(sandbox: Any) -> tuple[Path, str]:
    if sandbox is None:
        raise CommandFailure("the command backend runs the agent inside the trial's sandbox, and this session has none")
    if getattr(sandbox, "network", False):
        raise CommandFailure("the task's sandbox has network access; the command backend runs the agent CLI inside "
                             "the sandbox, where it must reach the model gateway and nothing else — run tasks "
                             "without network (or use the ahe backend)")
    channel = getattr(sandbox, "channel", lambda: None)()
    if channel is None:
        raise CommandFailure(f"the sandbox ({type(sandbox).__name__}) shares no folder with the host for the "
                             "gateway's socket; the command backend needs the local or docker sandbox")
    host_dir, inside = channel
    Path(host_dir).mkdir(parents=True, exist_ok=True)
    return Path(host_dir), inside


async def _start_forwarder(sandbox: Any, inside_dir: str) -> int:
    """Start the forwarder in the sandbox; the loopback port it listens on."""
    # python3 on the sandbox's PATH, else the interpreter the local sandbox binds for its driver
    probe = await sandbox.exec(f"command -v python3 || command -v {shlex.quote(jail_python()[0])}", timeout=30)
    python = probe.stdout.strip().splitlines()[0] if probe.exit_code == 0 and probe.stdout.strip() else ""
    if not python:
        raise CommandFailure("the sandbox has no python3, which the gateway's forwarder needs to give the CLI "
                             "a loopback endpoint; install python3 in the task's image")
    scratch = "/tmp/.ahe-forwarder"
    await sandbox.write_file(f"{scratch}/forwarder.py", FORWARDER.read_bytes())
    port_file = f"{scratch}/port"
    await sandbox.exec(f"{shlex.quote(python)} -I {scratch}/forwarder.py {inside_dir}/{SOCKET} {port_file} "
                       f">{scratch}/log 2>&1", timeout=FORWARDER_WAIT_SEC, background=True)
    deadline = time.monotonic() + FORWARDER_WAIT_SEC
    while time.monotonic() < deadline:
        try:
            return int((await sandbox.read_file(port_file)).decode().strip())
        except (OSError, ValueError):
            await asyncio.sleep(0.05)
    raise CommandFailure(f"the gateway's forwarder did not start in the sandbox within {FORWARDER_WAIT_SEC:g}s")


async def _place_harness(sandbox: Any, request: AgentRequest, settings: CommandSettings, *, base_url: str,
                         model: str) -> dict[str, Any]:
    """Copy the harness in, place its files, render its config files; the template values."""
    harness = Path(request.harness)
    with temp_dir("cli-harness") as staged:  # the harness's files, without its git history
        await asyncio.to_thread(shutil.copytree, harness, staged / "h", symlinks=True,
                                ignore=shutil.ignore_patterns(".git"))
        await sandbox.upload(staged / "h", HARNESS_DIR)
    await sandbox.write_file(INSTRUCTION_FILE, request.instruction.encode())
    values: dict[str, Any] = {
        "instruction": request.instruction, "instruction_file": INSTRUCTION_FILE, "base_url": base_url,
        "api_key": DUMMY_KEY, "model": model, "harness_dir": HARNESS_DIR, "workdir": settings.workdir,
        "trajectory_path": settings.trajectory.path if settings.trajectory else "",
    }
    for source, target in settings.files.items():
        await sandbox.upload(harness / source, target)
    for target, template in settings.config_files.items():
        text = render((harness / template).read_text(encoding="utf-8"), values)
        await sandbox.write_file(target, text.encode())
    values["command"] = render(settings.command, values)
    values["env"] = {"OPENAI_BASE_URL": base_url, "OPENAI_API_BASE": base_url, "OPENAI_API_KEY": DUMMY_KEY,
                     "AHE_MODEL": model, "NO_PROXY": "127.0.0.1,localhost",
                     **{k: render(v, values) for k, v in settings.env.items()}}
    return values


async def _run_command(sandbox: Any, values: dict[str, Any], settings: CommandSettings, request: AgentRequest,
                       gateway: ModelGateway) -> SessionResult:
    timeout = request.wall_clock_sec or DEFAULT_WALL_CLOCK_SEC
    out = await sandbox.exec(values["command"], timeout=timeout, cwd=settings.workdir, env=values["env"])
    (request.trace_dir / "agent-output.txt").write_text(
        f"$ {values['command']}\n(exit {out.exit_code})\n--- stdout\n{out.stdout[-200_000:]}\n"
        f"--- stderr\n{out.stderr[-200_000:]}\n", encoding="utf-8")
    res = SessionResult(session_id="command", agent="command", stop_reason=StopReason.no_tool_call,
                        turns=gateway.calls)
    last = (out.stderr.strip().splitlines() or out.stdout.strip().splitlines() or [""])[-1][:300]
    budget = next((r for r in gateway.refusals if "budget" in r), None)
    if out.timed_out:
        res.stop_reason, res.detail = StopReason.wall_clock, f"the agent command ran past {timeout:g}s"
    elif budget:
        res.stop_reason, res.detail, res.infra_error_kind = StopReason.infra_error, budget, "budget"
    elif out.exit_code in (126, 127):
        return _failure(f"the agent command could not start (exit {out.exit_code}: {last or 'not found'}); "
                        "install the CLI in the task's environment or fix harness.yaml's command")
    elif gateway.calls == 0:
        return _failure(f"the agent command exited {out.exit_code} without calling the model"
                        f"{': ' + last if last else ''}")
    elif out.exit_code != 0:
        res.detail = f"the agent command exited {out.exit_code}: {last}"
    return res


async def _write_trajectory(request: AgentRequest, res: SessionResult) -> str | None:
    """trajectory.json beside the trial: the CLI's own, else rebuilt from the gateway's record.
    The reason it was rebuilt, when the CLI was meant to write one."""
    note = None
    atif: dict[str, Any] | None = None
    try:
        settings = read_command_settings(request.harness)
    except AheError:
        settings = None
    spec = settings.trajectory if settings else None
    if spec is not None and request.sandbox is not None and res.infra_error_kind != "agent_command":
        try:
            data = await request.sandbox.read_file(spec.path)
            atif = parse_trajectory(data, spec.format, session_id=res.session_id)
        except (OSError, FileNotFoundError):
            note = f"the CLI wrote no trajectory at {spec.path}; rebuilt from the gateway's conversation"
        except (ValueError, UnicodeDecodeError) as exc:
            note = f"{spec.path} is not a {spec.format} trajectory ({str(exc)[:200]}); rebuilt from the gateway's conversation"
        except Exception as exc:  # the sandbox is gone: the gateway's record still tells the session
            note = f"{spec.path} could not be read ({type(exc).__name__}); rebuilt from the gateway's conversation"
    if atif is None:
        atif = trajectory_from_conversation(request.trace_dir / CONVERSATION_FILE, session_id=res.session_id)
    if note:
        atif.setdefault("extra", {})["trajectory_note"] = note
    atif.setdefault("final_metrics", {"total_prompt_tokens": res.usage.prompt_tokens,
                                      "total_completion_tokens": res.usage.completion_tokens,
                                      "total_steps": len(atif.get("steps", []))})
    res.tool_calls = count_tool_calls(atif)
    res.final_answer = (atif.get("extra") or {}).get("final_answer")
    path = request.trace_dir / "trajectory.json"
    atomic_write_json(path, json.loads(json.dumps(atif, default=str)))
    res.trajectory_path = str(path)
    res.events_path = str(request.trace_dir / "events.jsonl")
    return note
