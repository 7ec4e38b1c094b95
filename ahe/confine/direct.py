"""Inside the worker: shell commands straight to the sandbox's driver, not through the host.

When the trial's sandbox is a bwrap `LocalSandbox`, the host links the driver's listening
socket into the worker's socket folder and hands the worker the few things `exec` adds to a
command (its env, the work folder, the next output number; `LocalSandbox.direct_exec_offer`).
`DirectSandbox.exec` then costs the driver's wake-up and the worker's, not the host's two
more. It reaches nothing the worker could not reach before: the driver runs every request
inside the sandbox's jail, as `bash -c` through the host would. File operations still go
through the host (`SandboxProxy`), and so does `exec` when the driver's socket is gone.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any

from ahe.confine.remote import Channel, SandboxProxy
from ahe.confine.wire import MAX_MESSAGE_BYTES


class DirectSandbox(SandboxProxy):
    """`SandboxProxy` whose `exec` talks to the sandbox's driver itself."""

    def __init__(self, channel: Channel, offer: dict[str, Any]) -> None:
        super().__init__(channel)
        self.socket_path = str(offer["socket"])
        self.workdir = str(offer["workdir"])
        self.env = {str(k): str(v) for k, v in dict(offer["env"]).items()}
        self.limit = int(offer["max_output_bytes"])
        self._numbers = itertools.count(int(offer["next"]))
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._connecting: asyncio.Future | None = None
        self._dead: str | None = None

    async def _connect(self) -> asyncio.StreamWriter:
        if self._writer is not None:
            return self._writer
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(asyncio.open_unix_connection(self.socket_path, limit=MAX_MESSAGE_BYTES))
        reader, writer = await asyncio.shield(self._connecting)
        if self._writer is None:
            self._writer = writer
            asyncio.get_running_loop().create_task(self._read_loop(reader))
        return self._writer

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        from ahe.sandbox.base import SandboxError

        try:
            while line := await reader.readline():
                msg = json.loads(line)
                fut = self._pending.pop(str(msg.get("id")), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
        finally:
            self._dead = "the sandbox died (its driver closed the worker's channel); its processes are gone"
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(SandboxError(self._dead))
            self._pending.clear()

    async def exec(self, command: str, *, timeout: float | None, cwd: str | None = None,
                   env: dict[str, str] | None = None, background: bool = False) -> Any:
        """As `LocalSandbox.exec` (bwrap): `bash -c command`, output in /logs/exec/NNNN.*."""
        from ahe.sandbox.base import ExecResult, SandboxError
        from ahe.sandbox.local_files import PathMap

        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive, not {timeout}")
        if self._dead:
            raise SandboxError(self._dead)
        try:
            writer = await self._connect()
        except OSError:  # the link is gone: the host's path still works
            return await super().exec(command, timeout=timeout, cwd=cwd, env=env, background=background)
        name = f"{next(self._numbers):04d}"
        out, err = f"/logs/exec/{name}.stdout", f"/logs/exec/{name}.stderr"
        run_env = dict(self.env)
        run_env.update(env or {})
        rid = str(next(self._ids))
        req = {"op": "exec", "id": rid, "argv": ["bash", "-c", command],
               "cwd": PathMap.normalize(cwd or self.workdir, base=self.workdir, allow_dotdot=True),
               "env": {str(k): str(v) for k, v in run_env.items()}, "out": out, "err": err, "timeout": timeout,
               "background": background, "inline": self.limit}
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        t0 = time.monotonic()
        wait = None if (background or timeout is None) else timeout + 30
        try:
            writer.write(json.dumps(req, separators=(",", ":")).encode() + b"\n")
            resp = await (asyncio.wait_for(fut, wait) if wait else fut)
        except asyncio.TimeoutError:
            raise SandboxError(f"the sandbox did not answer within {wait:.0f} s; it is stuck — "
                               "stop it and start a new one") from None
        except asyncio.CancelledError:
            if not self._dead:
                writer.write(json.dumps({"op": "cancel", "id": "c" + rid, "target": rid}).encode() + b"\n")
            raise
        finally:
            self._pending.pop(rid, None)
        if "error" in resp:
            raise SandboxError(f"the sandbox could not run the command: {resp['error']}")
        return ExecResult(exit_code=resp["exit_code"], stdout=resp.get("stdout", ""), stderr=resp.get("stderr", ""),
                          timed_out=resp["timed_out"], duration_sec=time.monotonic() - t0, background=background,
                          stdout_path=out, stderr_path=err)
