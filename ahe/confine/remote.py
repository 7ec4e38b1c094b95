"""Inside the worker: the model client and the sandbox the session sees, both over the socket.

`GatewayClient` implements `ahe.llm.types.ModelClient` without the openai SDK (importing it
costs ~1 s and the worker has no network anyway); `SandboxProxy` implements the Sandbox
protocol by forwarding each call to the host, which runs it on the trial's real sandbox.
Errors come back typed, so the runtime classifies them exactly as in-process.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import io
import itertools
import os
import tarfile
from pathlib import Path
from typing import Any, Callable

from ahe.confine.wire import MAX_MESSAGE_BYTES, encode, read_message
from ahe.errors import ContextLengthError, InfrastructureError
from ahe.llm.types import LLMSettings, ModelResponse


class RemoteError(Exception):
    """The host refused a request (unknown operation, bad arguments, budget)."""


class Channel:
    """One connection to the host; concurrent requests are matched to answers by id."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._task: asyncio.Task | None = None

    @classmethod
    async def connect(cls, path: str) -> "Channel":
        reader, writer = await asyncio.open_unix_connection(path, limit=MAX_MESSAGE_BYTES)
        ch = cls(reader, writer)
        ch._task = asyncio.get_running_loop().create_task(ch._read_loop())
        return ch

    async def _read_loop(self) -> None:
        try:
            while (msg := await read_message(self._reader)) is not None:
                fut = self._pending.pop(msg.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
        finally:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(InfrastructureError("the host closed the worker's channel", kind="worker"))
            self._pending.clear()

    async def call(self, op: str, **fields: Any) -> dict[str, Any]:
        rid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        self._writer.write(encode({"id": rid, "op": op, **fields}))
        await self._writer.drain()
        msg = await fut
        if "error" in msg:
            raise _exception(msg["error"])
        return msg

    async def notify(self, op: str, **fields: Any) -> None:
        """A message the host does not answer (no `id`); sent in order with the requests."""
        self._writer.write(encode({"op": op, **fields}))
        await self._writer.drain()

    async def close(self) -> None:
        self._writer.close()
        if self._task is not None:
            self._task.cancel()


def _exception(err: dict[str, Any]) -> BaseException:
    """The exception the in-process code would have raised, from the host's error object."""
    kind, text = err.get("type"), err.get("message", "")
    if kind == "context_length":
        return ContextLengthError(text)
    if kind == "infra":
        return InfrastructureError(text, kind=err.get("kind") or "infrastructure")
    if kind == "sandbox":
        from ahe.sandbox.base import SandboxError

        return SandboxError(text)
    if kind == "sandbox_path":
        from ahe.sandbox.local_files import SandboxPathError

        return SandboxPathError(text)
    if kind == "os":
        code = err.get("errno") or errno.EIO
        cls = FileNotFoundError if code == errno.ENOENT else OSError
        return cls(code, text)
    if kind == "value":
        return ValueError(text)
    return RemoteError(text)


class GatewayClient:
    """`ModelClient` for the worker: each completion is one request to the host's gateway."""

    def __init__(self, channel: Channel, role: str, model: str) -> None:
        self.channel, self.role, self.model = channel, role, model
        self._sent: list[dict[str, Any]] = []  # the messages of the previous request
        self._tools: Any = None

    async def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                       settings: LLMSettings | None = None,
                       on_event: Callable[[str, dict[str, Any]], None] | None = None) -> ModelResponse:
        # Only what is new since the previous request crosses the socket: `prefix` messages are
        # the previous request's (compared by identity first: the session appends to one list).
        prefix = 0
        for old, new in zip(self._sent, messages):
            if old is not new and old != new:
                break
            prefix += 1
        fields: dict[str, Any] = {"prefix": prefix, "messages": messages[prefix:],
                                  "settings": settings.model_dump() if settings else None}
        if tools is not self._tools and tools != self._tools:
            fields["tools"] = tools
        self._sent, self._tools = list(messages), tools
        try:
            msg = await self.channel.call("complete", **fields)
        except BaseException:
            self._sent, self._tools = [], None  # resend everything next time
            raise
        if on_event is not None:
            for kind, data in msg.get("events") or ():
                on_event(kind, data)
        return ModelResponse.model_validate(msg["response"])

    async def aclose(self) -> None:
        return None


class SandboxProxy:
    """The Sandbox protocol, run by the host on the trial's sandbox. `local` paths of upload and
    download are paths of the worker (its scratch), carried as bytes; the host never opens them."""

    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    async def start(self) -> None:
        return None  # the host started it

    async def stop(self) -> None:
        return None  # the host stops it after the session

    async def exec(self, command: str, *, timeout: float | None, cwd: str | None = None,
                   env: dict[str, str] | None = None, background: bool = False) -> Any:
        from ahe.sandbox.base import ExecResult

        msg = await self.channel.call("exec", command=command, timeout=timeout, cwd=cwd, env=env,
                                      background=background)
        return ExecResult.model_validate(msg["result"])

    async def read_file(self, path: str) -> bytes:
        msg = await self.channel.call("read_file", path=path)
        return base64.b64decode(msg["data"])

    async def write_file(self, path: str, data: bytes) -> None:
        await self.channel.call("write_file", path=path, data=base64.b64encode(bytes(data)).decode())

    async def upload(self, local: Path, remote: str) -> None:
        local = Path(local)
        if local.is_dir():
            data, kind = await asyncio.to_thread(_tar, local), "tar"
        else:
            data, kind = await asyncio.to_thread(local.read_bytes), "file"
        await self.channel.call("upload", remote=remote, kind=kind, data=base64.b64encode(data).decode())

    async def download(self, remote: str, local: Path) -> None:
        msg = await self.channel.call("download", remote=remote)
        data, local = base64.b64decode(msg["data"]), Path(local)
        if msg["kind"] == "dir":
            from ahe.sandbox.local_files import extract_untrusted_tar

            await asyncio.to_thread(extract_untrusted_tar, data, local)
        else:
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(data)
            os.chmod(local, msg.get("mode", 0o644) & 0o777)


def _tar(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(folder), arcname=".")
    return buf.getvalue()
