"""The MOCK model server: a real HTTP endpoint speaking OpenAI chat completions from a policy.

Tests, demos and benchmarks point the real client at it, so the whole client code path
(HTTP, retries, parsing) runs without a model. It is a small HTTP/1.1 server on asyncio,
running its own event loop in one background thread: latency sleeps cost nothing, keep-alive
connections are reused, and — unlike a thread per connection, which measured 3x slower when
128 sessions share the process's GIL with the client — it adds little to per-step benchmarks.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

from ahe.testing.policy import Policy, load_policy
from ahe.testing.responder import Answer, Responder

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            408: "Request Timeout", 409: "Conflict", 413: "Payload Too Large", 422: "Unprocessable Entity",
            429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
            503: "Service Unavailable", 504: "Gateway Timeout"}
GARBAGE_BODY = b'{"mock": "garbage", "note": "this is not a chat completion"'
CONTEXT_LIMIT = 8192


def _error(message: str, type_: str = "mock_fault", code: str | None = None, param: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": type_, "param": param, "code": code}}).encode()


def _usage_json(u: dict[str, int]) -> dict[str, Any]:
    p, c = u.get("prompt_tokens", 0), u.get("completion_tokens", 0)
    return {
        "prompt_tokens": p,
        "completion_tokens": c,
        "total_tokens": p + c,
        "prompt_tokens_details": {"cached_tokens": u.get("cached_tokens", 0)},
        "completion_tokens_details": {"reasoning_tokens": u.get("reasoning_tokens", 0)},
    }


def completion_body(ans: Answer, cid: str, model: str) -> bytes:
    msg: dict[str, Any] = {"role": "assistant", "content": ans.content}
    if ans.reasoning is not None:
        msg["reasoning_content"] = ans.reasoning
    if ans.tool_calls:
        msg["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in ans.tool_calls
        ]
    return json.dumps({
        "id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
        "system_fingerprint": "ahe-mock",
        "choices": [{"index": 0, "message": msg, "finish_reason": ans.finish_reason, "logprobs": None}],
        "usage": _usage_json(ans.usage),
    }, ensure_ascii=False).encode()


def _pieces(text: str, size: int = 24) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def stream_body(ans: Answer, cid: str, model: str, include_usage: bool) -> bytes:
    """The whole SSE stream: role, reasoning, content and tool-call deltas, finish, usage, [DONE]."""
    created = int(time.time())
    out: list[str] = []

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: dict | None = None) -> None:
        body: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                                "choices": [] if delta is None else
                                [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        if usage is not None:
            body["usage"] = usage
        out.append("data: " + json.dumps(body, ensure_ascii=False) + "\n\n")

    chunk({"role": "assistant", "content": ""})
    if ans.reasoning:
        for piece in _pieces(ans.reasoning):
            chunk({"reasoning_content": piece})
    if ans.content:
        for piece in _pieces(ans.content):
            chunk({"content": piece})
    for index, (tid, name, args) in enumerate(ans.tool_calls):
        chunk({"tool_calls": [{"index": index, "id": tid, "type": "function",
                               "function": {"name": name, "arguments": ""}}]})
        for piece in _pieces(args):
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    chunk({}, ans.finish_reason)
    if include_usage:
        chunk(None, usage=_usage_json(ans.usage))
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()


class _BadRequest(Exception):
    pass


async def _read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                        ) -> tuple[str, str, dict[str, str], bytes, bool] | None:
    """(method, path, headers, body, keep_alive), or None when the client closed the connection."""
    line = await reader.readline()
    if not line:
        return None
    try:
        method, path, version = line.decode("latin-1").split()
    except ValueError:
        raise _BadRequest("malformed request line") from None
    headers: dict[str, str] = {}
    while True:
        h = await reader.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        name, _, value = h.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts = []
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                break
            parts.append(await reader.readexactly(size))
            await reader.readline()
        body = b"".join(parts)
    else:
        n = int(headers.get("content-length") or 0)
        body = await reader.readexactly(n) if n else b""
    conn = headers.get("connection", "").lower()
    keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
    return method.upper(), path, headers, body, keep_alive


class _Reply:
    __slots__ = ("status", "body", "content_type", "headers", "close")

    def __init__(self, status: int = 200, body: bytes = b"", content_type: str = "application/json",
                 headers: dict[str, str] | None = None, close: bool = False) -> None:
        self.status, self.body, self.content_type = status, body, content_type
        self.headers, self.close = headers or {}, close


def _encode(reply: _Reply, keep_alive: bool) -> bytes:
    head = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Error')}", f"Content-Type: {reply.content_type}",
            f"Content-Length: {len(reply.body)}", "Server: ahe-mock"]
    head += [f"{k}: {v}" for k, v in reply.headers.items()]
    if not keep_alive:
        head.append("Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.body


class MockLLMServer:
    """Start with `start()` (or `with`), point a client at `base_url`, read `requests` afterwards."""

    def __init__(self, policy: Policy | dict | str | Path, host: str = "127.0.0.1", port: int = 0,
                 *, log_requests: bool = True) -> None:
        if isinstance(policy, (str, Path)):
            policy = load_policy(policy)
        elif isinstance(policy, dict):
            policy = Policy.from_dict(policy)
        self.policy = policy
        self.responder = Responder(policy)
        self.host, self.port = host, port
        self.log_requests = log_requests
        self._requests: list[dict[str, Any]] = []
        self.api_keys: set[str] = set()  # bearer tokens seen, so tests can check a key reached the endpoint
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self._thread: threading.Thread | None = None
        self.base_url = ""

    # -- lifecycle --
    def start(self) -> str:
        """Bind and serve in a background thread; returns the base URL (ending in /v1)."""
        if self._thread is not None:
            return self.base_url
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(asyncio.start_server(
                    self._serve, self.host, self.port, backlog=1024, limit=1 << 22, reuse_address=True))
            except BaseException as exc:  # noqa: BLE001 - reported to start()'s caller
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name="ahe-mock-llm", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread = None
            raise failure[0]
        port = self._server.sockets[0].getsockname()[1]
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "") else (f"[{self.host}]" if ":" in self.host else self.host)
        self.base_url = f"http://{shown}:{port}/v1"
        return self.base_url

    def stop(self) -> None:
        """Close the listener and every connection, waking requests that sleep on latency or a hang."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return

        async def shutdown() -> None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), loop)
        thread.join(timeout=5)
        self._thread = self._loop = self._server = None

    def __enter__(self) -> "MockLLMServer":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- inspection --
    @property
    def requests(self) -> list[dict[str, Any]]:
        """Parsed bodies of every chat-completions request so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def chaos_counts(self) -> dict[str, int]:
        """Faults injected by the policy's `chaos`, by kind (and `answers`: every request answered)."""
        with self.responder._lock:
            return {**self.responder.chaos_counts, "answers": self.responder.answers}

    @property
    def hits(self) -> dict[str, int]:
        """How often each rule answered, by rule name (or `rules[i]`), plus `default`."""
        with self.responder._lock:
            return dict(self.responder.hits)

    def reset(self) -> None:
        """Forget logged requests and `times` counters (between tests sharing one server)."""
        with self._lock:
            self._requests.clear()
        self.responder.reset()

    # -- serving --
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            while True:
                try:
                    request = await _read_request(reader, writer)
                except _BadRequest as exc:
                    writer.write(_encode(_Reply(400, _error(f"mock server: {exc}", "invalid_request_error")), False))
                    break
                if request is None:
                    break
                method, path, headers, body, keep_alive = request
                auth = headers.get("authorization", "")
                if auth.startswith("Bearer ") and self.log_requests:
                    self.api_keys.add(auth[len("Bearer "):])
                reply = await self._route(method, path.split("?")[0].rstrip("/"), body)
                if reply is None:  # a `disconnect` fault
                    break
                writer.write(_encode(reply, keep_alive and not reply.close))
                await writer.drain()
                if not keep_alive or reply.close:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError, ValueError):
            pass  # the client went away (e.g. after its timeout), or we are stopping
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _route(self, method: str, path: str, raw: bytes) -> _Reply | None:
        if method == "GET" and path in ("/v1/models", "/models"):
            names = self.responder.compiled.model_names or ["mock-model"]
            data = [{"id": n, "object": "model", "created": 0, "owned_by": "ahe-mock"} for n in names]
            return _Reply(200, json.dumps({"object": "list", "data": data}).encode())
        if method != "POST" or path not in ("/v1/chat/completions", "/chat/completions"):
            return _Reply(404, _error(f"mock server: no route {method} {path}", "not_found"))
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            return _Reply(400, _error("mock server: the request body is not a JSON object", "invalid_request_error"))
        if self.log_requests:
            with self._lock:
                self._requests.append(body)
        try:
            ans = self.responder.answer(body)
        except Exception as exc:  # a policy bug must show up as an answer, not a dead connection
            return _Reply(500, _error(f"mock server error: {type(exc).__name__}: {exc}"))
        fault = ans.fault
        wait = ans.latency_sec + ((fault.hang_sec or 0.0) if fault else 0.0)
        if wait > 0:
            await asyncio.sleep(wait)
        return self._render(ans, body, fault)

    def _render(self, ans: Answer, body: dict[str, Any], fault: Any) -> _Reply | None:
        model = str(body.get("model") or "mock-model")
        if fault is not None:
            if fault.disconnect:
                return None
            if fault.garbage:
                text = fault.garbage if isinstance(fault.garbage, str) else GARBAGE_BODY
                return _Reply(200, text.encode() if isinstance(text, str) else text)
            if fault.context_length:
                n = max(ans.usage.get("prompt_tokens", 0), CONTEXT_LIMIT + 1)
                msg = fault.message or (
                    f"This model's maximum context length is {CONTEXT_LIMIT} tokens. However, your messages "
                    f"resulted in {n} tokens. Please reduce the length of the messages.")
                return _Reply(400, _error(msg, "invalid_request_error", "context_length_exceeded", "messages"))
            if fault.status:
                headers = {}
                if fault.retry_after is not None:
                    ra = fault.retry_after
                    headers["Retry-After"] = str(int(ra)) if ra == int(ra) else str(ra)
                if fault.retry_after_ms is not None:
                    headers["retry-after-ms"] = str(fault.retry_after_ms)
                return _Reply(fault.status, _error(fault.message or f"mock fault: HTTP {fault.status}"), headers=headers)
        cid = f"chatcmpl-mock-{next(self._ids)}"
        if body.get("stream"):
            opts = body.get("stream_options") or {}
            return _Reply(200, stream_body(ans, cid, model, bool(opts.get("include_usage"))), "text/event-stream",
                          {"Cache-Control": "no-cache"})
        return _Reply(200, completion_body(ans, cid, model))
