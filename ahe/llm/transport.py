"""A lean HTTP/1.1 transport for the one request the model client makes: POST chat/completions.

The openai SDK's request path (request options, auth hooks, httpx, httpcore, anyio) costs
~0.9 ms of CPU per call on this project's machines, against ~0.05 ms for writing the request
and reading the answer on a kept-alive asyncio stream. Every model call of every trial goes
through the host's one event loop (and, confined, through the gateway on it), so at 128
trials at once that CPU is most of the host's work (docs/benchmarks.md, section 10).

It sends what the SDK sends (the SDK client's own headers: key, organisation and project,
user agent, platform) and hands back the body or an answer the client maps exactly as the SDK
would (`status_error`: the SDK's own exception for a status >= 400). It is used only where it
cannot differ: an `http`/`https` base URL without query or credentials, and no proxy in the
environment. Anything it does not handle — a redirect, an encoding other than gzip/deflate —
raises `Unsuitable`, and that request goes through the SDK. `AHE_LLM_TRANSPORT=sdk` turns it
off.
"""

from __future__ import annotations

import asyncio
import os
import time
import zlib
from typing import Any
from urllib.parse import urlsplit

KEEPALIVE_SEC = 5.0  # an idle connection older than this is closed, not reused (httpx's default)
OFF_ENV = "AHE_LLM_TRANSPORT"
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy")


class Unsuitable(Exception):
    """This answer (or endpoint) needs the SDK's transport."""


class ConnectionFailed(Exception):
    """The request could not be sent or its answer not read; the text says why."""


class Answer:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


def usable(base_url: str, env: Any = os.environ) -> bool:
    """Whether requests to `base_url` may take the lean path."""
    if env.get(OFF_ENV, "").lower() == "sdk":
        return False
    if any(env.get(v) or env.get(v.upper()) for v in _PROXY_VARS):
        return False  # proxies (and NO_PROXY) are the SDK's business
    try:
        u = urlsplit(base_url)
        port = u.port
    except ValueError:
        return False
    return u.scheme in ("http", "https") and bool(u.hostname) and not (u.query or u.fragment or u.username
                                                                        or u.password) and port != 0


class LeanTransport:
    """Kept-alive connections to one endpoint, for one event loop."""

    def __init__(self, base_url: str, headers: dict[str, str], ssl_context: Any = None) -> None:
        u = urlsplit(base_url)
        self.https = u.scheme == "https"
        self.host, self.port = u.hostname or "", u.port or (443 if self.https else 80)
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.ssl_context = ssl_context
        default_port = self.port == (443 if self.https else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        lines = [f"POST {u.path.rstrip('/')}/chat/completions HTTP/1.1",
                 f"Host: {host if default_port else f'{host}:{self.port}'}", "Connection: keep-alive"]
        lines += [f"{k}: {v}" for k, v in headers.items()
                  if k.lower() not in ("host", "connection", "content-length", "transfer-encoding", "accept-encoding")]
        lines.append("Accept-Encoding: gzip, deflate")
        self._head = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []

    async def post(self, body: bytes) -> Answer:
        """Send one request; its answer. A kept-alive connection the server closed meanwhile is
        replaced once (nothing was read from it, so the request was not served)."""
        request = self._head + b"Content-Length: %d\r\n\r\n" % len(body) + body
        while True:
            conn = self._take()
            reused = conn is not None
            if conn is None:
                conn = await self._open()
            reader, writer = conn
            try:
                writer.write(request)
                await writer.drain()
                first = await reader.readline()
                if not first:
                    raise ConnectionResetError("the server closed the connection without an answer")
                answer, keep = await _read_answer(reader, first)
            except (ConnectionResetError, BrokenPipeError) as exc:
                writer.close()
                if reused:
                    continue
                raise ConnectionFailed(str(exc) or type(exc).__name__) from None
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, zlib.error) as exc:
                writer.close()
                raise ConnectionFailed(str(exc) or type(exc).__name__) from None
            except BaseException:  # cancelled, timed out: the connection's state is unknown
                writer.close()
                raise
            if keep:
                self._idle.append((reader, writer, time.monotonic()))
            else:
                writer.close()
            return answer

    def _take(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        now = time.monotonic()
        while self._idle:
            reader, writer, since = self._idle.pop()
            if now - since < KEEPALIVE_SEC and not reader.at_eof() and not writer.is_closing():
                return reader, writer
            writer.close()
        return None

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            reader, writer = await asyncio.open_connection(
                self.host, self.port, ssl=self.ssl_context if self.https else None,
                server_hostname=self.host if self.https else None, limit=1 << 20)
        except OSError as exc:  # refused, unreachable, name not resolved, TLS failure
            raise ConnectionFailed(str(exc) or type(exc).__name__) from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            import socket

            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        return reader, writer

    def close(self) -> None:
        for _, writer, _ in self._idle:
            writer.close()
        self._idle.clear()


async def _read_answer(reader: asyncio.StreamReader, first: bytes) -> tuple[Answer, bool]:
    """(the answer, whether the connection may be reused) from its status line on."""
    while True:
        parts = first.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
            raise ValueError(f"not an HTTP answer: {first[:60]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            headers[name] = f"{headers[name]}, {value.strip()}" if name in headers else value.strip()
        if not 100 <= status < 200:
            break
        first = await reader.readline()  # an interim answer (100 Continue): the real one follows
    keep = parts[0] == b"HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    elif "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    else:
        body, keep = await reader.read(), False
    encoding = headers.pop("content-encoding", "identity").lower().strip()
    if encoding in ("gzip", "x-gzip", "deflate"):
        body = _decompress(body, encoding)
    elif encoding not in ("identity", ""):
        raise Unsuitable(f"content-encoding {encoding}")
    return Answer(status, headers, body), keep


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    out = bytearray()
    while True:
        size = int((await reader.readline()).split(b";", 1)[0].strip() or b"x", 16)
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return bytes(out)
        out += await reader.readexactly(size)
        await reader.readexactly(2)


def _decompress(body: bytes, encoding: str) -> bytes:
    if encoding == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)  # raw deflate, as some servers send it
    return zlib.decompress(body, 16 + zlib.MAX_WBITS)


def encode_body(kw: dict[str, Any]) -> bytes:
    """The request body as the SDK encodes it (its own encoder where it has one)."""
    try:
        from openai._utils._json import openapi_dumps  # an SDK internal; json below when it has gone
    except ImportError:
        import json

        return json.dumps(kw, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    return openapi_dumps(kw)


def sdk_headers(sdk: Any, timeout_sec: float) -> dict[str, str] | None:
    """The headers the SDK client `sdk` sends with a request; None when its authentication is
    not a plain key (workload identity, a provider's hooks), which only the SDK can do."""
    if getattr(sdk, "workload_identity", None) is not None or getattr(sdk, "_provider_runtime", None) is not None:
        return None
    auth = {k: v for k, v in dict(getattr(sdk, "auth_headers", None) or {}).items() if isinstance(v, str)}
    if not auth:
        return None
    headers = {k: v for k, v in sdk.default_headers.items() if isinstance(v, str)}
    headers.update(auth)
    headers.update({"X-Stainless-Async": "async:asyncio", "X-Stainless-Retry-Count": "0",
                    "X-Stainless-Read-Timeout": str(float(timeout_sec))})
    return headers


def sdk_httpx() -> Any:
    """The HTTP library of the installed openai SDK: httpx2 for the SDK this project pins, httpx for older ones."""
    try:
        import httpx2 as httpx
    except ImportError:
        import httpx
    return httpx


def status_error(sdk: Any, answer: Answer, url: str) -> Exception:
    """The exception the SDK raises for this answer (status >= 400), built by the SDK itself."""
    httpx = sdk_httpx()
    headers = [(k, v) for k, v in answer.headers.items() if k not in ("content-length", "transfer-encoding")]
    response = httpx.Response(answer.status, headers=headers, content=answer.body,
                              request=httpx.Request("POST", url))
    make = getattr(sdk, "_make_status_error_from_response", None)  # an SDK internal (checked on openai 1.40-3.63)
    if make is not None:
        return make(response)
    import openai  # the SDK's own public constructor when the internal has gone

    return openai.APIStatusError(f"HTTP {answer.status}", response=response, body=None)
