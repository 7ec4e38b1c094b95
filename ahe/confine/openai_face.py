"""An OpenAI-compatible HTTP face of the model gateway, on a unix socket.

A third-party agent (a CLI that speaks chat completions) is pointed at this face instead of a
model provider: every request it makes becomes one `ModelGateway.complete_request`, so the key
stays in the host's client, the gateway meters and records the call and enforces the trial's
budget, exactly as for AHE's own confined sessions. The socket sits in a folder bound into the
trial's sandbox; a forwarder inside the sandbox's own network namespace (forwarder.py) gives the
CLI a plain `http://127.0.0.1:PORT/v1` to talk to. Nothing else is served: any other path is
refused and counted by the gateway.

Only `POST /v1/chat/completions` (JSON or `stream: true`, answered as one SSE burst once the
gateway has the whole answer) and `GET /v1/models` are spoken.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from ahe.confine.gateway import ModelGateway

MAX_BODY_BYTES = 64 * 1024 * 1024
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 413: "Payload Too Large", 429: "Too Many Requests",
            502: "Bad Gateway"}
_SETTINGS = ("temperature", "max_tokens", "top_p", "reasoning_effort")


class OpenAIFace:
    """Serve `gateway` as chat completions on the unix socket at `path` (`start`, then `close`)."""

    def __init__(self, gateway: ModelGateway, path: Path, *, model: str) -> None:
        self.gateway, self.path, self.model = gateway, Path(path), model
        self.requests = 0
        self._server: asyncio.base_events.Server | None = None
        self._ids = 0

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() or self.path.is_symlink():
            self.path.unlink()
        self._server = await asyncio.start_unix_server(self._serve, sock=bind_unix(self.path), limit=1 << 20)
        os.chmod(self.path, 0o666)  # an image whose USER is not root still connects

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            try:
                await asyncio.wait_for(self._server.wait_closed(), 5)
            except (asyncio.TimeoutError, Exception):  # a client that hangs on does not hold the trial
                pass
            self._server = None
        try:
            self.path.unlink()
        except OSError:
            pass

    # ---------------------------------------------------------------- HTTP
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                req = await _read_request(reader)
                if req is None:
                    break
                method, path, body, keep_alive = req
                status, ctype, payload = await self._answer(method, path, body)
                head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", f"Content-Type: {ctype}",
                        f"Content-Length: {len(payload)}", "Server: ahe-gateway"]
                if not keep_alive:
                    head.append("Connection: close")
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
                await writer.drain()
                if not keep_alive:
                    break
        except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            self.gateway.refuse("a connection that does not speak HTTP")  # it ends, nothing is served
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _answer(self, method: str, path: str, body: bytes) -> tuple[int, str, bytes]:
        route = path.split("?", 1)[0].rstrip("/")
        if route.endswith("/models") and method == "GET":
            data = {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "ahe"}]}
            return 200, "application/json", json.dumps(data).encode()
        if not (route.endswith("/chat/completions") and method == "POST"):
            self.gateway.refuse(f"{method} {route[:200]} is not served (only chat completions)")
            return 404, "application/json", _error(f"{method} {route[:200]}: the AHE gateway serves only "
                                                   "POST /v1/chat/completions", "not_found")
        try:
            data = json.loads(body)
            if not isinstance(data, dict):
                raise ValueError("not an object")
        except ValueError:
            self.gateway.refuse("a chat completion whose body is not a JSON object")
            return 400, "application/json", _error("the body is not a JSON object", "invalid_request_error")
        self.requests += 1
        return await self._complete(data)

    async def _complete(self, data: dict[str, Any]) -> tuple[int, str, bytes]:
        settings = {k: data[k] for k in _SETTINGS if data.get(k) is not None}
        if "max_completion_tokens" in data and "max_tokens" not in settings:
            settings["max_tokens"] = data["max_completion_tokens"]
        wire: dict[str, Any] = {"messages": data.get("messages"), "tools": data.get("tools") or None}
        if settings:
            wire["settings"] = settings
        out = await self.gateway.complete_request(wire)
        model = str(data.get("model") or self.model)
        if "error" in out:
            err = out["error"]
            status = {"context_length": 400, "value": 400}.get(err.get("type"), 502)
            if err.get("kind") == "budget":
                status = 400  # not 429: a CLI would retry a spent budget forever
            code = "context_length_exceeded" if err.get("type") == "context_length" else err.get("kind")
            return status, "application/json", _error(err.get("message", "?"), err.get("type", "error"), code)
        self._ids += 1
        cid = f"chatcmpl-ahe-{self._ids}"
        if data.get("stream"):
            return 200, "text/event-stream", _stream(out["response"], cid, model)
        return 200, "application/json", json.dumps(_completion(out["response"], cid, model)).encode()


def bind_unix(path: Path) -> socket.socket:
    """A unix socket bound at `path`, however long (a trial folder can pass AF_UNIX's 108 bytes):
    bound through /proc/self/fd/N/NAME of its folder."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        sock.bind(f"/proc/self/fd/{fd}/{path.name}")
    except BaseException:
        sock.close()
        raise
    finally:
        os.close(fd)
    return sock


def _error(message: str, type_: str, code: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": type_, "param": None, "code": code}}).encode()


def _message(resp: dict[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": resp.get("content")}
    if resp.get("reasoning_content"):
        msg["reasoning_content"] = resp["reasoning_content"]
    if resp.get("tool_calls"):
        msg["tool_calls"] = [{"id": tc["id"], "type": "function",
                              "function": {"name": tc["name"], "arguments": tc.get("raw_arguments") or ""}}
                             for tc in resp["tool_calls"]]
    return msg


def _usage(resp: dict[str, Any]) -> dict[str, Any]:
    u = resp.get("usage") or {}
    p, c = u.get("prompt_tokens", 0), u.get("completion_tokens", 0)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c,
            "prompt_tokens_details": {"cached_tokens": u.get("cached_tokens", 0)},
            "completion_tokens_details": {"reasoning_tokens": u.get("reasoning_tokens", 0)}}


def _finish(resp: dict[str, Any]) -> str:
    return resp.get("finish_reason") or ("tool_calls" if resp.get("tool_calls") else "stop")


def _completion(resp: dict[str, Any], cid: str, model: str) -> dict[str, Any]:
    return {"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": _message(resp), "finish_reason": _finish(resp), "logprobs": None}],
            "usage": _usage(resp)}


def _stream(resp: dict[str, Any], cid: str, model: str) -> bytes:
    """The whole answer as one SSE stream: role, content, tool calls, finish, usage, [DONE]."""
    created, msg = int(time.time()), _message(resp)

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
        body = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": choices, **extra}
        return "data: " + json.dumps(body, ensure_ascii=False) + "\n\n"

    delta: dict[str, Any] = {"role": "assistant", "content": msg.get("content") or ""}
    if msg.get("reasoning_content"):
        delta["reasoning_content"] = msg["reasoning_content"]
    if msg.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **tc} for i, tc in enumerate(msg["tool_calls"])]
    out = [chunk([{"index": 0, "delta": delta, "finish_reason": None}]),
           chunk([{"index": 0, "delta": {}, "finish_reason": _finish(resp)}]),
           chunk([], usage=_usage(resp)), "data: [DONE]\n\n"]
    return "".join(out).encode()


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes, bool] | None:
    """(method, path, body, keep_alive), or None when the client closed the connection."""
    line = await reader.readline()
    if not line:
        return None
    method, path, version = line.decode("latin-1").split()
    headers: dict[str, str] = {}
    while (h := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts, total = [], 0
        while (size := int((await reader.readline()).split(b";")[0].strip() or b"0", 16)) > 0:
            total += size
            if total > MAX_BODY_BYTES:
                raise ValueError("body too large")
            parts.append(await reader.readexactly(size))
            await reader.readline()
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass
        body = b"".join(parts)
    else:
        n = int(headers.get("content-length") or 0)
        if n > MAX_BODY_BYTES:
            raise ValueError("body too large")
        body = await reader.readexactly(n) if n else b""
    conn = headers.get("connection", "").lower()
    keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
    return method.upper(), path, body, keep_alive
