"""The host side of a confined session: start the worker's jail, serve its socket, collect.

`ConfinedWorker.launch` starts the jail at once (its imports overlap the sandbox's start and
the task's setup); `run` then hands it the job and serves its requests — model calls to the
`ModelGateway`, sandbox calls to the trial's sandbox — until it reports `done`, dies, or
outlives the wall clock. The session's usage is the gateway's count; its trace files are
copied into the trial folder as regular files only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ahe.confine import jail
from ahe.confine.conversation import (
    CLAIM_FILE, attach_claimed_metadata, sub_agent_trajectories, trajectory_from_conversation,
)
from ahe.confine.gateway import CONVERSATION_FILE, GatewayBudget, ModelGateway
from ahe.confine.sandbox_ops import serve_sandbox_op
from ahe.confine.trace_files import TraceSink
from ahe.confine.wire import MAX_MESSAGE_BYTES, SOCKET_NAME, encode, error, read_message
from ahe.errors import ConfigError, InfrastructureError, UnconfinedWarning
from ahe.io import atomic_write_json
from ahe.llm.types import ModelClient
from ahe.runtime.results import SessionResult, StopReason
from ahe.sandbox import bwrap as bw
from ahe.tempdirs import make_temp_dir

log = logging.getLogger(__name__)
ConfineMode = Literal["auto", "bwrap", "none", "docker"]
GRACE_SEC = 30.0  # past the wall clock, the host stops waiting for the worker's own report
START_TIMEOUT_SEC = 60.0
OFF_ENV = "AHE_CONFINE"  # =none turns confinement off everywhere: only to test the layers behind it
DIRECT_SOCKET = "sandbox.sock"  # the sandbox driver's socket, as linked into the worker's folder
SANDBOX_OPS = frozenset({"exec", "read_file", "write_file", "upload", "download"})
_NOT_CONFINED = ("the harness's code runs in a plain child process, NOT confined (it sees this "
                 "machine's files and network; it still holds no key)")
_warned: set[str] = set()


@dataclass
class ConfinedSessionSpec:
    """One session's job, as `Session(...)` would take it in-process."""

    instruction: str
    trace_dir: Path  # host folder: trajectory.json, events.jsonl, sub_agents/, conversation.jsonl
    wall_clock_sec: float | None = None
    working_directory: str = "/app"
    prompt_variables: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    min_turns: int | None = None  # the gate's smoke plan needs this many turns at least
    budget: GatewayBudget = field(default_factory=GatewayBudget)
    # Another agent's loop instead of AHE's Session: `module:function` under ahe. (worker.py), e.g.
    # an agent backend's (ahe.agents.mini_session:run); it reads its settings from the harness folder.
    runner: str | None = None


class WorkerError(InfrastructureError):
    """The worker could not be started (bwrap missing under mode `bwrap`, jail failed)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="worker")


class ConfinedWorker:
    """One jailed worker process for one session. Use `launch`, then `run`, then `close`."""

    def __init__(self, workspace: Path, mode: ConfineMode = "auto") -> None:
        if mode not in ("auto", "bwrap", "none", "docker"):
            raise ValueError(f"confinement must be 'auto', 'bwrap', 'docker' or 'none', not {mode!r}")
        self.workspace, self.mode = Path(workspace), mode
        self.confined = False
        self.where = "plain"  # bwrap (a jail on this machine), docker (a container of its own) or plain
        self.proc: asyncio.subprocess.Process | None = None
        self._dir: Path | None = None
        self._server: asyncio.AbstractServer | None = None
        self._conn: asyncio.Future | None = None
        self._cmd: jail.WorkerCommand | None = None
        self._stderr = b""
        self._sink: TraceSink | None = None
        self._direct: Any = None  # the sandbox whose driver the worker reaches directly

    @classmethod
    async def launch(cls, workspace: Path, mode: ConfineMode = "auto") -> "ConfinedWorker":
        w = cls(workspace, mode)
        try:
            await w._start()
        except BaseException:
            await w.close()
            raise
        return w

    async def _start(self) -> None:
        self.where = self._choose()
        self.confined = self.where != "plain"
        self._dir = make_temp_dir("confine")
        sock_dir = self._dir / "run" if self.where == "docker" else self._dir  # docker: a folder the worker's uid owns
        sock_dir.mkdir(exist_ok=True)
        loop = asyncio.get_running_loop()
        self._conn = loop.create_future()

        def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if self._conn.done():
                writer.close()  # one connection per worker; a second one is refused
                return
            self._conn.set_result((reader, writer))

        sock = sock_dir / SOCKET_NAME
        self._server = await asyncio.start_unix_server(accept, path=str(sock), limit=MAX_MESSAGE_BYTES)
        os.chmod(sock, 0o600)
        if self.where == "docker":
            from ahe.confine.container import launch_container

            self._cmd, self.proc = await launch_container(self.workspace, sock_dir, jail.worker_env())
            return
        if self.confined:
            self._cmd = jail.bwrap_command(bw.find_bwrap(), self.workspace, self._dir)
        else:
            self._cmd = jail.plain_command(self.workspace, self._dir, self._dir / "scratch")
        self.proc = await asyncio.create_subprocess_exec(
            *self._cmd.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=self._cmd.env, cwd=self._cmd.cwd, start_new_session=True)

    def _choose(self) -> str:
        if os.environ.get(OFF_ENV) == "none":  # tests of the layers behind it (the sealed snapshot)
            _warn(f"{_NOT_CONFINED} ({OFF_ENV}=none is set; meant only for testing the sealed verifiers).")
            return "plain"
        if self.mode == "none":
            _warn(f"{_NOT_CONFINED} (confinement 'none' was asked for).")
            return "plain"
        if self.mode == "docker":  # never a quiet fallback to this machine: it starts or fails (container.py)
            return "docker"
        ok, why = bw.check()
        if ok:
            return "bwrap"
        if self.mode == "bwrap":
            raise WorkerError(f"cannot confine the harness's code: {why}")
        _warn(f"{_NOT_CONFINED}, because {why}.")
        return "plain"

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        exited = asyncio.ensure_future(self.proc.wait())
        try:
            done, _ = await asyncio.wait({self._conn, exited}, timeout=START_TIMEOUT_SEC,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()
        if self._conn.done():
            return self._conn.result()
        tail = await self._stderr_tail()
        if not done:
            raise WorkerError(f"the confined worker did not start within {START_TIMEOUT_SEC:g} s: {tail}")
        raise WorkerError(f"the confined worker exited at start (code {self.proc.returncode}): {tail}")

    async def _stderr_tail(self) -> str:
        if self.proc is not None and self.proc.stderr is not None and self.proc.returncode is not None:
            try:
                self._stderr += await asyncio.wait_for(self.proc.stderr.read(), 2)
            except (asyncio.TimeoutError, OSError):
                pass
        text = self._stderr.decode("utf-8", "replace").strip().splitlines()
        return " | ".join(text[-3:])[-600:] or "no message"

    # ------------------------------------------------------------------ the session
    async def run(self, spec: ConfinedSessionSpec, client: ModelClient, sandbox: Any = None) -> SessionResult:
        """Run the session in the worker. The gateway's usage is the result's usage."""
        spec.trace_dir.mkdir(parents=True, exist_ok=True)
        gateway = ModelGateway(client, record_dir=spec.trace_dir, budget=spec.budget)
        job = {"workspace": self._cmd.workspace, "trace_dir": self._cmd.trace_dir, "instruction": spec.instruction,
               "wall_clock_sec": spec.wall_clock_sec, "working_directory": spec.working_directory,
               "prompt_variables": spec.prompt_variables, "session_id": spec.session_id, "state": spec.state,
               "min_turns": spec.min_turns, "sandbox": sandbox is not None, "role": getattr(client, "role", "agent"),
               "model": getattr(client, "model", None), "trace_limit_bytes": jail.TRACE_LIMIT_BYTES,
               "runner": spec.runner}
        job["direct_exec"] = self._offer_direct(sandbox)
        t0 = time.monotonic()
        self._sink = TraceSink(spec.trace_dir, 2 * jail.TRACE_LIMIT_BYTES)
        try:
            try:
                reader, writer = await self._connection()
                outcome = await self._serve(reader, writer, job, gateway, sandbox, spec)
            except WorkerError as exc:
                outcome = {"failure": str(exc), "kind": "worker"}
            if isinstance(outcome.get("failure"), str):
                outcome["failure"] = self._host_paths(outcome["failure"])
            if outcome.get("config_error"):  # as in-process: a harness that cannot start a session raises
                self._keep_files(outcome, gateway)
                raise ConfigError(str(outcome["failure"]))
            return self._result(outcome, gateway, spec, time.monotonic() - t0)
        finally:
            gateway.close()
            self._direct_done()

    def _offer_direct(self, sandbox: Any) -> dict[str, Any] | None:
        """The sandbox driver's socket, linked into the worker's socket folder (no other socket
        becomes reachable), and what `exec` adds to a command; None when the sandbox offers none."""
        offer = getattr(sandbox, "direct_exec_offer", None)
        offer = offer() if callable(offer) else None
        if not offer:
            return None
        link = self._dir / DIRECT_SOCKET
        try:
            os.link(offer["socket"], link)  # the same inode: both are temporary folders of AHE's
        except OSError:
            sandbox.direct_exec_done()
            return None
        self._direct = sandbox
        return {**offer, "socket": os.path.join(os.path.dirname(self._cmd.socket_path), DIRECT_SOCKET)}

    def _direct_done(self) -> None:
        if self._direct is not None:
            self._direct.direct_exec_done()

    def _keep_files(self, outcome: dict[str, Any], gateway: ModelGateway) -> list[str]:
        """Write the trace files handed back (trace_files.TraceSink); the names refused."""
        if self._sink is None:  # a load check keeps no trace
            return []
        refused = self._sink.write(outcome.get("files") or {})
        for name in refused:
            gateway.refuse(f"trace file {name[:120]!r} is not one a session writes, or too much; dropped")
        return refused

    def _host_paths(self, text: str) -> str:
        """The worker's messages name /workspace; the user knows the folder by its host path."""
        return text.replace(self._cmd.workspace + "/", str(self.workspace.resolve()) + "/")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, job: dict[str, Any],
                     gateway: ModelGateway, sandbox: Any, spec: ConfinedSessionSpec) -> dict[str, Any]:
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        tasks: set[asyncio.Task] = set()

        async def answer(msg: dict[str, Any]) -> None:
            try:
                out = await self._dispatch(msg, job, gateway, sandbox, done)
            except Exception as exc:  # a bug here must not leave the worker waiting forever
                log.exception("confined worker request %s failed", msg.get("op"))
                out = {"error": error("infra", f"the host failed to serve {msg.get('op')}: {exc}", kind="worker")}
            if "id" not in msg and msg.get("op") == "trace":  # a notice: nobody waits for an answer
                return
            out["id"] = msg.get("id")
            writer.write(encode(out))
            await writer.drain()

        async def pump() -> None:
            while (msg := await read_message(reader)) is not None:
                t = asyncio.ensure_future(answer(msg))
                tasks.add(t)
                t.add_done_callback(tasks.discard)

        pumping = asyncio.ensure_future(pump())
        exited = asyncio.ensure_future(self.proc.wait())
        limit = None if spec.wall_clock_sec is None else spec.wall_clock_sec + GRACE_SEC
        try:
            await asyncio.wait({done, exited, pumping}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
            if done.done():
                return done.result()
            if pumping.done() and pumping.exception() is not None:
                return {"failure": f"the worker sent a malformed message ({pumping.exception()})", "kind": "worker"}
            if not exited.done() and not pumping.done():
                return {"failure": f"the worker outlived the wall clock by {GRACE_SEC:g} s and was killed",
                        "kind": "wall_clock"}
            await asyncio.wait({exited}, timeout=2)
            code = self.proc.returncode
            return {"failure": f"the confined worker exited (code {code}) before the session ended: "
                               f"{await self._stderr_tail()}", "kind": "worker"}
        finally:
            for t in (pumping, exited, *tasks):
                t.cancel()
            writer.close()

    async def _dispatch(self, msg: dict[str, Any], job: dict[str, Any], gateway: ModelGateway, sandbox: Any,
                        done: asyncio.Future) -> dict[str, Any]:
        op = msg.get("op")
        if op == "complete":
            return await gateway.complete_request(msg)
        if op in SANDBOX_OPS:
            if sandbox is None:
                gateway.refuse(f"sandbox operation {op} in a session without a sandbox")
                return {"error": error("refused", "this session has no sandbox")}
            return await serve_sandbox_op(sandbox, op, msg)
        if op == "hello":
            return {"job": job}
        if op == "trace":  # the trace so far, written as the final one is (trace_files.py)
            return {"refused": self._keep_files(msg, gateway)}  # those the worker sends whole next time
        if op == "done":
            if not done.done():
                done.set_result(msg)
            return {}
        gateway.refuse(f"unknown operation {str(op)[:40]!r}")
        return {"error": error("refused", f"the gateway has no operation {str(op)[:40]!r}; it answers "
                                          "complete, exec, read_file, write_file, upload, download, trace")}

    def _result(self, outcome: dict[str, Any], gateway: ModelGateway, spec: ConfinedSessionSpec,
                seconds: float) -> SessionResult:
        self._keep_files(outcome, gateway)
        res = None
        if outcome.get("result"):
            try:
                res = SessionResult.model_validate(outcome["result"])
            except ValueError:
                outcome = {"failure": "the worker reported a result that is not a SessionResult", "kind": "worker"}
        if res is None:
            stop = StopReason.wall_clock if outcome.get("kind") == "wall_clock" else StopReason.infra_error
            res = SessionResult(session_id=spec.session_id or "confined", agent="?", stop_reason=stop,
                                detail=outcome.get("failure") or "the worker ended without a result",
                                duration_sec=round(seconds, 4))
            if stop == StopReason.infra_error:
                res.infra_error_kind = outcome.get("kind") or "worker"
        res.usage = gateway.usage  # what the gateway saw, not what the worker claims
        traj, events = write_gateway_trajectory(spec.trace_dir, res), spec.trace_dir / "events.jsonl"
        res.trajectory_path = str(traj) if traj is not None else None
        res.events_path = str(events) if events.exists() else None
        return res

    async def close(self) -> None:
        """Kill the jail (and with it every process the harness started) and remove the socket."""
        if self.where == "docker" and self.proc is not None:
            try:
                await self.proc.remove()  # the container and every process in it
            except Exception as exc:  # tracked: removed at exit or by the stale sweep
                log.warning("removing the worker's container failed: %s", exc)
        elif self.proc is not None and self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            try:
                await asyncio.wait_for(self.proc.wait(), 5)
            except asyncio.TimeoutError:
                log.warning("the confined worker %s did not exit after SIGKILL", self.proc.pid)
        if self._server is not None:
            self._server.close()
        self._direct_done()  # the worker is gone: its commands' numbers are final
        self._direct = None
        if self._dir is not None:
            await asyncio.to_thread(shutil.rmtree, self._dir, True)
            self._dir = None


def worker_mode(isolation: str, sandbox: Any) -> ConfineMode:
    """Where a trial's worker runs: in a container of its own when the trial's sandbox is a docker
    one (`worker_mode = "docker"` on the sandbox) and confinement is not switched off; else as
    `isolation` says (a bwrap jail on this machine)."""
    if isolation != "none" and getattr(sandbox, "worker_mode", None) == "docker":
        return "docker"
    return isolation  # type: ignore[return-value]


async def load_problem_confined(workspace: Path, mode: ConfineMode = "auto", *, runner: str | None = None) -> str | None:
    """None when the harness at `workspace` loads (in a worker, never here); else the loader's error.
    `runner`: another agent's loader (ConfinedSessionSpec.runner), asked the same way."""
    problem, _ = await describe_confined(workspace, mode, describe=False, runner=runner)
    return problem


async def describe_confined(workspace: Path, mode: ConfineMode = "auto", *, describe: bool = True,
                            runner: str | None = None) -> tuple[str | None, dict[str, Any] | None]:
    """(None, description) when the harness at `workspace` loads in a worker (ahe.runtime.describe:
    its tools, schemas, skills, middleware hooks, sub-agents as data); (the loader's error, None) else."""
    root = Path(workspace).resolve()
    if runner is None and not (root / "agent.yaml").is_file():  # as load_agent says it
        return f"{root / 'agent.yaml'}: not found — is {root} a harness workspace (a folder with agent.yaml)?", None
    if not root.is_dir():  # no jail can bind a missing folder
        return f"{root}: not a folder", None
    worker = await ConfinedWorker.launch(workspace, mode)
    try:
        reader, writer = await worker._connection()
        job = {"workspace": worker._cmd.workspace, "trace_dir": worker._cmd.trace_dir, "check": True,
               "describe": describe, "runner": runner}
        gateway = ModelGateway(_NoClient())
        out = await worker._serve(reader, writer, job, gateway, None,
                                  ConfinedSessionSpec(instruction="", trace_dir=Path("."), wall_clock_sec=START_TIMEOUT_SEC))
    finally:
        await worker.close()
    if out.get("loaded"):
        description = out.get("description")
        return None, description if isinstance(description, dict) else None
    return worker._host_paths(out.get("failure") or "the harness did not load"), None


def check_workspace_loads(workspace: Path, mode: ConfineMode = "auto") -> None:
    """`load_problem_confined` for synchronous callers: raises ConfigError with the loader's message."""
    import concurrent.futures

    from ahe.errors import ConfigError

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # works inside and outside an event loop
        problem = pool.submit(asyncio.run, load_problem_confined(workspace, mode)).result()
    if problem:
        raise ConfigError(problem)


class _NoClient:
    role, model = "agent", "none"

    async def complete(self, *a: Any, **k: Any) -> Any:
        raise InfrastructureError("a load check makes no model call", kind="worker")


async def run_confined_session(workspace: Path, spec: ConfinedSessionSpec, client: ModelClient,
                               sandbox: Any = None, *, mode: ConfineMode = "auto",
                               worker: ConfinedWorker | None = None) -> SessionResult:
    """One session of the harness at `workspace`, confined; `worker` when already launched."""
    worker = worker or await ConfinedWorker.launch(workspace, mode)
    try:
        return await worker.run(spec, client, sandbox)
    finally:
        await worker.close()


def write_gateway_trajectory(trace_dir: Path, res: SessionResult) -> Path | None:
    """The trial's trajectory.json, rebuilt from the gateway's record (not the worker's word, which
    stays beside it as trajectory.claimed.json and lends it only tool-result metadata)."""
    conv = trace_dir / CONVERSATION_FILE
    if not conv.is_file():
        return None
    traj = trajectory_from_conversation(conv)
    claim = trace_dir / CLAIM_FILE
    if claim.is_file():
        try:
            attach_claimed_metadata(traj, json.loads(claim.read_bytes()))
            traj["extra"]["claim"] = CLAIM_FILE
        except ValueError:  # an unreadable claim lends nothing
            traj["extra"]["claim"] = f"{CLAIM_FILE} (not valid JSON)"
    traj["session_id"] = res.session_id
    traj["agent"]["name"] = res.agent
    traj["extra"].update(stop_reason=res.stop_reason.value, detail=res.detail, duration_sec=res.duration_sec,
                         turns=res.turns)
    path = trace_dir / "trajectory.json"
    atomic_write_json(path, traj)
    _write_sub_agent_trajectories(trace_dir, conv)
    return path


def _write_sub_agent_trajectories(trace_dir: Path, conv: Path) -> None:
    """Each sub-agent's trajectory.json, rebuilt from the gateway's record beside its claim."""
    claims: dict[str, Any] = {}
    for claim in sorted((trace_dir / "sub_agents").rglob(CLAIM_FILE)) if (trace_dir / "sub_agents").is_dir() else ():
        try:
            claims[str(claim.parent.relative_to(trace_dir))] = json.loads(claim.read_bytes())
        except ValueError:  # an unreadable claim names no conversation
            claims[str(claim.parent.relative_to(trace_dir))] = {}
    for folder, traj in sub_agent_trajectories(conv, claims).items():
        atomic_write_json(trace_dir / folder / "trajectory.json", traj)


def _warn(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning(message)
    warnings.warn(message, UnconfinedWarning, stacklevel=3)
