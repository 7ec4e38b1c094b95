"""The confined worker: runs inside the jail, imports the harness's code, runs one session.

Started by host.py as `python -I -S -c BOOT` with only AHE's package, the interpreter and its
libraries, the workspace (read-only, at /workspace), a private size-limited /trace and /tmp,
and the trial's socket under /run/ahe. It imports the runtime first (while the host starts the
sandbox), then asks the host for its job, runs `Session.run`, and hands back the result and
the trace files it wrote. Everything it can reach outside the jail goes through that socket.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from pathlib import Path
from typing import Any

from ahe.confine.remote import Channel, GatewayClient, SandboxProxy
from ahe.confine.wire import JAIL_SOCKET_DIR, SOCKET_NAME
from ahe.runtime import Session, load_agent  # imported before the job: overlaps the host's sandbox start

MAX_TRACE_FILES = 2000


def _collect(trace_dir: Path, limit_bytes: int, only: set[str] | None = None) -> dict[str, str]:
    """Regular files under the trace folder (no links, no devices), base64, up to limit_bytes."""
    out, total = {}, 0
    for root, dirs, files in os.walk(trace_dir, followlinks=False):
        for name in sorted(files):
            path = Path(root) / name
            if not path.is_file() or path.is_symlink():
                continue
            if only is not None and str(path.relative_to(trace_dir)) not in only:
                continue
            data = path.read_bytes()
            total += len(data)
            if total > limit_bytes or len(out) >= MAX_TRACE_FILES:
                return out
            out[str(path.relative_to(trace_dir))] = base64.b64encode(data).decode()
    return out


def _raise_turns(agent: Any, turns: int, depth: int = 0) -> None:
    """The gate's smoke session needs as many turns as its plan; never fewer than configured."""
    if agent.config.max_turns < turns:
        agent.config = agent.config.model_copy(update={"max_turns": turns})
    if depth < 3:
        for sub in agent.sub_agents:
            _raise_turns(agent.sub_agent(sub), turns, depth + 1)


SYNC_SEC = 1.0  # how often the trace written so far is handed to the host (live view; kept on a kill)


async def _sync_traces(channel: Channel, trace_dir: Path, limit: int) -> None:
    """Every SYNC_SEC, hand the host the trace files that changed (a trial can be watched live,
    and a worker killed at its wall clock still leaves its trace up to the last second)."""
    seen: dict[str, tuple[int, int]] = {}
    while True:
        await asyncio.sleep(SYNC_SEC)
        changed = {}
        for root, _, files in os.walk(trace_dir):
            for name in files:
                path = Path(root) / name
                try:
                    st = path.lstat()
                except OSError:
                    continue
                rel = str(path.relative_to(trace_dir))
                if seen.get(rel) != (st.st_mtime_ns, st.st_size):
                    seen[rel] = (st.st_mtime_ns, st.st_size)
                    changed[rel] = path
        if changed:
            files = await asyncio.to_thread(_collect, trace_dir, limit, set(changed))
            if files:
                await channel.call("trace", files=files)


# The host's one event loop serves every worker's model and sandbox calls; with a hundred workers
# runnable at once a fair scheduler would give it a hundredth of a CPU. A lower priority for the
# workers (not for the host) keeps the host responsive (bench/bench_confine.py, docs/benchmarks.md).
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


async def _main(socket_path: str, exit_with_host: bool = False) -> int:
    try:
        os.nice(NICE)
    except OSError:
        pass
    channel = await Channel.connect(socket_path)
    if exit_with_host:
        _exit_with_host(channel._writer.get_extra_info("socket"))
    job = (await channel.call("hello"))["job"]
    trace_dir = Path(job["trace_dir"])
    if job.get("runner"):  # another agent's loop (an agent backend's in-jail runner), same socket
        done = await _run_other(job, channel, trace_dir)
        done.setdefault("files", await asyncio.to_thread(_collect, trace_dir, _trace_limit(job)))
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
        limit = int(job.get("trace_limit_bytes") or 32 << 20)
        syncing = asyncio.ensure_future(_sync_traces(channel, trace_dir, limit))
        try:
            result = await session.run(job["instruction"])
        finally:
            syncing.cancel()
        done = {"result": result.model_dump(mode="json")}
    except Exception as exc:  # the harness does not load, a session cannot start: reported, not raised
        from ahe.errors import ConfigError

        text = str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
        done = {"failure": text[:2000], "config_error": isinstance(exc, ConfigError)}
    done["files"] = await asyncio.to_thread(_collect, trace_dir, int(job.get("trace_limit_bytes") or 32 << 20))
    await channel.call("done", **done)
    await channel.close()
    return 0


def _trace_limit(job: dict[str, Any]) -> int:
    return int(job.get("trace_limit_bytes") or 32 << 20)


async def _run_other(job: dict[str, Any], channel: Channel, trace_dir: Path) -> dict[str, Any]:
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
        syncing = asyncio.ensure_future(_sync_traces(channel, trace_dir, _trace_limit(job)))
        try:
            return await runner(job, channel, trace_dir)
        finally:
            syncing.cancel()
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
