"""The confined worker: runs inside the jail, imports the harness's code, runs one session.

Started by host.py as `python -I -S -c BOOT` with only AHE's package, the interpreter and its
libraries, the workspace (read-only, at /workspace), a private size-limited /trace and /tmp,
and the trial's socket under /run/ahe. It imports the runtime first (while the host starts the
sandbox), then asks the host for its job, runs `Session.run`, and hands back the result and
the trace files it wrote. Everything it can reach outside the jail goes through that socket.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from ahe.confine.remote import Channel, GatewayClient, SandboxProxy
from ahe.confine.trace_files import TraceShipper
from ahe.confine.wire import JAIL_SOCKET_DIR, SOCKET_NAME
from ahe.runtime import Session, load_agent  # imported before the job: overlaps the host's sandbox start

def _raise_turns(agent: Any, turns: int, depth: int = 0) -> None:
    """The gate's smoke session needs as many turns as its plan; never fewer than configured."""
    if agent.config.max_turns < turns:
        agent.config = agent.config.model_copy(update={"max_turns": turns})
    if depth < 3:
        for sub in agent.sub_agents:
            _raise_turns(agent.sub_agent(sub), turns, depth + 1)


SYNC_SEC = 1.0  # how often the trace written so far is handed to the host (live view; kept on a kill)


class _TraceSync:
    """Every SYNC_SEC, hand the host what changed in the trace files (a trial can be watched live,
    and a worker killed at its wall clock still leaves its trace up to the last second); `finish`
    hands over the rest. Only tails cross the socket (trace_files.TraceShipper)."""

    def __init__(self, channel: Channel, trace_dir: Path, limit: int) -> None:
        self.channel, self.shipper = channel, TraceShipper(trace_dir, limit)
        self._stop = asyncio.Event()
        self._task: asyncio.Future | None = None

    def start(self) -> "_TraceSync":
        self._task = asyncio.ensure_future(self._loop())
        return self

    async def _loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._stop.wait(), SYNC_SEC)
                return
            except asyncio.TimeoutError:
                pass
            files = await asyncio.to_thread(self.shipper.changed)
            if files:  # a notice, not a request: no answer to wake this worker (and the host) for
                await self.channel.notify("trace", files=files)
                self.shipper.handed()

    async def stop(self) -> None:
        """Let a hand-over under way end (so the worker knows what the host holds), then stop."""
        self._stop.set()
        if self._task is not None:
            try:
                await self._task
            except Exception:  # a failed hand-over: the final one sends every file whole
                self.shipper.forget()

    async def final(self) -> dict[str, Any]:
        """The `files` of the `done` message: all that changed since the last hand-over."""
        await self.stop()
        return await asyncio.to_thread(self.shipper.changed, final=True)


# The host's one event loop serves every worker's model and sandbox calls; with a hundred workers
# runnable at once a fair scheduler would give it a hundredth of a CPU. A lower priority for the
# workers (not for the host) keeps the host responsive (bench/bench_confine.py, docs/benchmarks.md).
# SCHED_BATCH: a worker woken by the host's answer does not preempt the host (Linux never lets a
# batch task preempt on wake-up), so the host answers the other workers first instead of waiting
# behind each one it wakes; an idle CPU still runs the worker at once.
NICE = 5


def _exit_with_host(sock: Any) -> None:
    """In a container of its own nothing ends the worker when AHE dies (a bwrap jail has
    --die-with-parent): a thread exits the process once the host's end of the socket is closed,
    even while a hook holds the event loop. It only peeks, so the loop still reads every message."""
    import select
    import socket
    import threading
    import time

    fd = os.dup(sock.fileno())
    watch = socket.socket(fileno=fd)

    def run() -> None:
        while True:
            select.select([watch], [], [])
            try:
                if watch.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                    os._exit(3)
            except BlockingIOError:
                pass
            except OSError:
                os._exit(3)
            time.sleep(0.5)  # data waits for the event loop: look again later, not in a busy loop

    threading.Thread(target=run, name="ahe-exit-with-host", daemon=True).start()


def _lower_priority() -> None:
    try:
        os.nice(NICE)
    except OSError:
        pass
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        pass


async def _main(socket_path: str, exit_with_host: bool = False) -> int:
    _lower_priority()
    channel = await Channel.connect(socket_path)
    if exit_with_host:
        _exit_with_host(channel._writer.get_extra_info("socket"))
    job = (await channel.call("hello"))["job"]
    trace_dir = Path(job["trace_dir"])
    sync = _TraceSync(channel, trace_dir, _trace_limit(job))
    if job.get("runner"):  # another agent's loop (an agent backend's in-jail runner), same socket
        done = await _run_other(job, channel, trace_dir, sync)
        if "files" not in done:
            done["files"] = await sync.final()
        await channel.call("done", **done)
        await channel.close()
        return 0
    try:
        agent = load_agent(Path(job["workspace"]))
        if job.get("check"):  # only: does the harness load (and, asked, what is in it)? AHE never imports it
            from ahe.runtime.describe import describe_agent

            await channel.call("done", loaded=True, description=describe_agent(agent) if job.get("describe") else None)
            await channel.close()
            return 0
        if job.get("min_turns"):
            _raise_turns(agent, int(job["min_turns"]))
        sandbox = SandboxProxy(channel) if job.get("sandbox") else None
        if sandbox is not None and job.get("direct_exec"):  # commands straight to the sandbox's driver
            from ahe.confine.direct import DirectSandbox

            sandbox = DirectSandbox(channel, job["direct_exec"])
        client = GatewayClient(channel, job.get("role", "agent"), job.get("model") or "model")
        session = Session(agent, client, sandbox=sandbox, trace_dir=trace_dir,
                          wall_clock_sec=job.get("wall_clock_sec"),
                          working_directory=job.get("working_directory") or "/app",
                          prompt_variables=job.get("prompt_variables") or {},
                          session_id=job.get("session_id"), state=job.get("state") or {})
        sync.start()
        try:
            result = await session.run(job["instruction"])
        finally:
            await sync.stop()
        done = {"result": result.model_dump(mode="json")}
    except Exception as exc:  # the harness does not load, a session cannot start: reported, not raised
        from ahe.errors import ConfigError

        text = str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
        done = {"failure": text[:2000], "config_error": isinstance(exc, ConfigError)}
    done["files"] = await sync.final()
    await channel.call("done", **done)
    await channel.close()
    return 0


def _trace_limit(job: dict[str, Any]) -> int:
    return int(job.get("trace_limit_bytes") or 32 << 20)


async def _run_other(job: dict[str, Any], channel: Channel, trace_dir: Path, sync: _TraceSync) -> dict[str, Any]:
    """The job names `module:function` (an agent backend's runner, e.g. mini-swe-agent's loop),
    called as `await function(job, channel, trace_dir)`; it returns the `done` message (result
    or failure). Named by the host, never by the harness: the worker imports AHE's code only."""
    import importlib

    name = str(job["runner"])
    module, _, func = name.partition(":")
    if not module.startswith("ahe.") or not func:
        return {"failure": f"unknown session runner {name[:80]!r}"}
    try:
        runner = getattr(importlib.import_module(module), func)
        if job.get("check"):
            return await runner(job, channel, trace_dir)
        sync.start()
        try:
            return await runner(job, channel, trace_dir)
        finally:
            await sync.stop()
    except Exception as exc:  # the runner's own failure: reported, not raised
        return {"failure": f"{type(exc).__name__}: {exc}"[:2000]}


def main() -> None:
    sys.dont_write_bytecode = True
    path = sys.argv[1] if len(sys.argv) > 1 else f"{JAIL_SOCKET_DIR}/{SOCKET_NAME}"
    code = asyncio.run(_main(path, "--exit-with-host" in sys.argv[2:]))
    sys.stdout.flush()
    os._exit(code)  # no interpreter teardown: threads a hook left behind do not keep the jail alive


if __name__ == "__main__":
    main()
