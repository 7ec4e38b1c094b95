"""The model client's lean transport (ahe/llm/transport.py): the same request as the SDK's, the
answers it reads itself, and the SDK wherever it could differ."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest

from ahe.llm import make_client, transport
from ahe.llm.types import RoleConfig

OK = json.dumps({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()


class Server:
    """Answers each request with the next scripted raw answer (bytes, or a callable of the
    connection's writer); records every request head and body and each new connection."""

    def __init__(self, answers: list) -> None:
        self.answers, self.requests, self.connections = list(answers), [], 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = next(int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length"))
                self.requests.append((head.decode("latin-1"), await reader.readexactly(length)))
                answer = self.answers.pop(0)
                if callable(answer):
                    answer(writer)
                    return
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def _answer(body: bytes, status: str = "200 OK", headers: str = "") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{headers}\r\n"
            .encode() + body)


async def _serve(answers: list) -> tuple[Server, str, asyncio.AbstractServer]:
    srv = Server(answers)
    server = await asyncio.start_server(srv.handle, "127.0.0.1", 0)
    return srv, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", server


def _client(url: str, **cfg):
    return make_client("agent", RoleConfig(**{"model": "m", "base_url": url, "max_attempts": 2,
                                              "backoff_initial_sec": 0.01, **cfg}))


async def test_the_request_carries_the_sdks_headers_and_body(monkeypatch):
    monkeypatch.setenv("OPENAI_ORG_ID", "org-7")
    srv, url, server = await _serve([_answer(OK), _answer(OK)])
    async with server:
        client = _client(url)
        assert client._lean() is not None
        r = await client.complete([{"role": "user", "content": "grüß"}])
        await client.complete([{"role": "user", "content": "again"}])
    assert r.content == "hi" and r.usage.prompt_tokens == 3
    head, body = srv.requests[0]
    lines = {ln.split(":", 1)[0].lower(): ln.split(":", 1)[1].strip() for ln in head.split("\r\n")[1:] if ":" in ln}
    assert head.startswith("POST /v1/chat/completions HTTP/1.1")
    sdk = client._pool().sdk
    for k, v in {**sdk.auth_headers, **{k: v for k, v in sdk.default_headers.items() if isinstance(v, str)}}.items():
        if k.lower() != "x-stainless-async":
            assert lines[k.lower()] == v, k
    assert lines["openai-organization"] == "org-7" and lines["authorization"].startswith("Bearer ")
    assert json.loads(body) == {"model": "m", "messages": [{"role": "user", "content": "grüß"}]}
    assert srv.connections == 1  # the second request reused the connection


async def test_chunked_and_gzip_answers_are_read(monkeypatch):
    packed = gzip.compress(OK)
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: gzip\r\n\r\n"
               + b"".join(b"%x\r\n%s\r\n" % (len(packed[i:i + 7]), packed[i:i + 7]) for i in range(0, len(packed), 7))
               + b"0\r\n\r\n")
    srv, url, server = await _serve([chunked, lambda w: (w.write(b"HTTP/1.0 200 OK\r\n\r\n" + OK), w.close())])
    async with server:
        client = _client(url)
        assert (await client.complete([{"role": "user", "content": "x"}])).content == "hi"
        assert (await client.complete([{"role": "user", "content": "x"}])).content == "hi"  # read to the end


async def test_a_kept_alive_connection_the_server_closed_is_replaced():
    srv, url, server = await _serve([_answer(OK), lambda w: w.close(), _answer(OK)])
    async with server:
        client = _client(url, max_attempts=1)
        await client.complete([{"role": "user", "content": "x"}])
        await client.complete([{"role": "user", "content": "x"}])  # no attempt lost to the stale connection
    assert srv.connections == 2 and len(srv.requests) == 3


async def test_errors_are_the_sdks_exceptions_and_a_redirect_goes_through_the_sdk():
    err = json.dumps({"error": {"message": "maximum context length exceeded", "code": "context_length_exceeded"}}).encode()
    srv, url, server = await _serve([_answer(b"{}", "307 Temporary Redirect", "Location: /v1/chat/completions\r\n"),
                                     _answer(OK), _answer(err, "400 Bad Request")])
    async with server:
        client = _client(url)
        assert (await client.complete([{"role": "user", "content": "x"}])).content == "hi"
        from ahe.errors import ContextLengthError

        with pytest.raises(ContextLengthError, match="maximum context length"):
            await client.complete([{"role": "user", "content": "x"}])
    assert len(srv.requests) == 3


def test_the_sdk_transport_is_kept_where_the_lean_one_could_differ(monkeypatch):
    assert transport.usable("http://127.0.0.1:8000/v1", {})
    assert transport.usable("https://api.openai.com/v1", {})
    assert not transport.usable("https://api.openai.com/v1", {"HTTPS_PROXY": "http://proxy:3128"})
    assert not transport.usable("https://api.openai.com/v1", {"all_proxy": "socks5://p"})
    assert not transport.usable("https://x/openai?api-version=2024-01-01", {})
    assert not transport.usable("https://user:pw@x/v1", {})
    assert not transport.usable("ftp://x/v1", {})
    assert not transport.usable("http://127.0.0.1:8000/v1", {"AHE_LLM_TRANSPORT": "sdk"})
    monkeypatch.setenv("AHE_LLM_TRANSPORT", "sdk")
    assert _client("http://127.0.0.1:9/v1")._lean() is None


@pytest.fixture
def tls_cert(tmp_path):
    """A self-signed certificate for localhost (the openssl command line, as on any Debian)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed (apt-get install -y openssl)")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    return key, cert


async def test_https_is_verified_and_spoken_over_tls(tls_cert):
    """An https endpoint: the lean transport speaks TLS with the server's name, refuses a certificate
    nobody vouches for (the client's own context: the SDK's CA bundle), and reads the answer when the
    certificate is trusted."""
    import ssl

    from ahe.llm.client import _ssl_context

    key, cert = tls_cert
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    srv = Server([_answer(OK), _answer(OK)])
    server = await asyncio.start_server(srv.handle, "127.0.0.1", 0, ssl=server_ctx)
    url = f"https://localhost:{server.sockets[0].getsockname()[1]}/v1"
    async with server:
        untrusted = transport.LeanTransport(url, {"Authorization": "Bearer k"}, _ssl_context())
        with pytest.raises(transport.ConnectionFailed, match="(?i)certificate"):
            await untrusted.post(b"{}")
        untrusted.close()
        trusting = ssl.create_default_context(cafile=str(cert))
        lean = transport.LeanTransport(url, {"Authorization": "Bearer k"}, trusting)
        answer = await lean.post(b'{"model": "m"}')
        lean.close()
    assert answer.status == 200 and answer.body == OK
    head, body = srv.requests[-1]
    assert head.startswith("POST /v1/chat/completions HTTP/1.1") and "Host: localhost:" in head and body == b'{"model": "m"}'
