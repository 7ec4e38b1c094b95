"""The model client against the MOCK server over real HTTP: retries, classification, usage, cost."""

from __future__ import annotations

import asyncio
import email.utils
import random
import socket
import threading
import time

import pytest

from ahe.errors import ConfigError, ContextLengthError, InfrastructureError
from ahe.llm import LLMSettings, Price, RoleConfig, UsageLedger, make_client, resolve_role
from ahe.llm.client import OpenAIModelClient, backoff_delay, retry_after_seconds
from ahe.llm.roles import NO_KEY, ResolvedEndpoint
from ahe.llm.types import Usage
from ahe.testing import MockLLMServer

MSGS = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "write the file"}]
FAST = dict(backoff_initial_sec=0.01, backoff_max_sec=5.0, timeout_sec=5.0)


class Events(list):
    def __call__(self, kind, data):
        self.append((kind, data))

    def kinds(self):
        return [k for k, _ in self]


@pytest.fixture
async def mock():
    """start(policy, ledger=None, **role_cfg) -> (server, client); both are closed after the test."""
    servers, clients = [], []

    def start(policy, ledger=None, **cfg):
        srv = MockLLMServer(policy)
        srv.start()
        servers.append(srv)
        role_cfg = RoleConfig(base_url=srv.base_url, model="mock-strong", **{**FAST, **cfg})
        client = make_client("agent", role_cfg, ledger, env={})
        clients.append(client)
        return srv, client

    yield start
    for client in clients:
        await client.aclose()
    for srv in servers:
        srv.stop()


async def test_reply_tool_calls_usage_and_sampling_settings(mock):
    srv, client = mock({"rules": [{"reply": "on it", "tool_calls": [{"name": "sh", "arguments": {"cmd": "ls"}}]}]})
    ev = Events()
    tools = [{"type": "function", "function": {"name": "sh", "parameters": {"type": "object"}}}]
    resp = await client.complete(MSGS, tools=tools, settings=LLMSettings(temperature=0.2, max_tokens=99, top_p=0.9),
                                 on_event=ev)
    assert resp.content == "on it" and resp.finish_reason == "tool_calls" and resp.model == "mock-strong"
    [call] = resp.tool_calls
    assert (call.id, call.name, call.arguments, call.repaired, call.parse_error) == ("call_1_0", "sh", {"cmd": "ls"}, False, None)
    assert resp.attempts == 1 and resp.usage.prompt_tokens > 0 and resp.usage.completion_tokens > 0
    assert resp.usage.cost_usd is None and ev == []
    sent = srv.requests[-1]
    assert (sent["temperature"], sent["max_tokens"], sent["top_p"]) == (0.2, 99, 0.9)
    assert "reasoning_effort" not in sent and sent["tools"] == tools and sent["model"] == "mock-strong"
    assert resp.assistant_message()["tool_calls"][0]["function"] == {"name": "sh", "arguments": '{"cmd": "ls"}'}

    await client.complete(MSGS, settings=LLMSettings(temperature=None, max_tokens=None, reasoning_effort="high"))
    sent = srv.requests[-1]
    assert sent["reasoning_effort"] == "high" and not {"temperature", "max_tokens", "top_p", "tools"} & set(sent)
    await client.complete(MSGS)
    assert set(srv.requests[-1]) == {"model", "messages"}


async def test_429_with_retry_after_is_honoured_then_succeeds(mock):
    srv, client = mock({"rules": [{"times": 1, "fault": {"status": 429, "retry_after": 1}}, {"reply": "ok"}]})
    ev = Events()
    t0 = time.monotonic()
    resp = await client.complete(MSGS, on_event=ev)
    elapsed = time.monotonic() - t0
    assert resp.content == "ok" and resp.attempts == 2 and len(srv.requests) == 2
    assert 0.95 <= elapsed < 3.0
    [(kind, data)] = ev
    assert kind == "llm_retry" and data["status"] == 429 and data["retry_after"] == 1.0 and data["wait_sec"] == 1.0
    assert data["attempt"] == 1 and data["role"] == "agent"


async def test_retry_after_ms_is_preferred_and_capped_by_backoff_max(mock):
    srv, client = mock({"rules": [{"times": 1, "fault": {"status": 503, "retry_after": 30, "retry_after_ms": 200}},
                                  {"times": 1, "fault": {"status": 503, "retry_after": 30}}, {"reply": "ok"}]},
                       backoff_max_sec=0.3)
    ev = Events()
    t0 = time.monotonic()
    assert (await client.complete(MSGS, on_event=ev)).content == "ok"
    assert [d["wait_sec"] for _, d in ev] == [0.2, 0.3]
    assert time.monotonic() - t0 < 2.0


async def test_persistent_500_fails_after_exactly_max_attempts(mock):
    ledger = UsageLedger()
    srv, client = mock({"rules": [{"fault": {"status": 500, "message": "boom"}}]}, ledger=ledger, max_attempts=3)
    ev = Events()
    with pytest.raises(InfrastructureError) as exc:
        await client.complete(MSGS, on_event=ev)
    err = exc.value
    assert err.kind == "llm" and not isinstance(err, ContextLengthError)
    assert len(srv.requests) == 3 and ev.kinds() == ["llm_retry", "llm_retry"]
    msg = str(err)
    for part in (srv.base_url, "mock-strong", "3 attempts", "HTTP 500", "boom"):
        assert part in msg
    row = ledger.snapshot()["agent"]
    assert (row["calls"], row["failed_calls"], row["attempts"]) == (0, 1, 3)


async def test_hang_times_out_is_retried_and_then_succeeds_or_fails(mock):
    srv, client = mock({"rules": [{"match": {"first_user_contains": "once"}, "times": 1, "fault": {"hang_sec": 10}},
                                  {"match": {"first_user_contains": "always"}, "fault": {"hang_sec": 10}},
                                  {"reply": "ok"}]}, timeout_sec=0.3, max_attempts=2)
    resp = await client.complete([{"role": "user", "content": "once"}])
    assert resp.content == "ok" and resp.attempts == 2
    ev = Events()
    t0 = time.monotonic()
    with pytest.raises(InfrastructureError) as exc:
        await client.complete([{"role": "user", "content": "always"}], on_event=ev)
    assert exc.value.kind == "llm" and "timeout_sec=0.3" in str(exc.value) and "2 attempts" in str(exc.value)
    assert 0.55 < time.monotonic() - t0 < 3.0 and ev[0][1]["status"] is None


@pytest.mark.parametrize("garbage", [True, "{}", '{"choices": []}', '{"error": {"message": "overloaded"}}', "[1]"])
async def test_garbage_response_is_retried(mock, garbage):
    srv, client = mock({"rules": [{"times": 1, "fault": {"garbage": garbage}}, {"reply": "ok"}]})
    ev = Events()
    resp = await client.complete(MSGS, on_event=ev)
    assert resp.content == "ok" and resp.attempts == 2 and len(srv.requests) == 2
    assert "invalid response" in ev[0][1]["error"]


async def test_dropped_connection_is_retried(mock):
    srv, client = mock({"rules": [{"times": 1, "fault": {"disconnect": True}}, {"reply": "ok"}]})
    ev = Events()
    assert (await client.complete(MSGS, on_event=ev)).content == "ok"
    assert "connection error" in ev[0][1]["error"]


async def test_unreachable_endpoint_is_an_infrastructure_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nobody listens there
    cfg = RoleConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_attempts=2, **FAST)
    client = make_client("debugger", cfg, env={})
    with pytest.raises(InfrastructureError) as exc:
        await client.complete(MSGS)
    await client.aclose()
    assert exc.value.kind == "llm" and "role debugger" in str(exc.value) and "connection error" in str(exc.value)


async def test_context_length_is_not_retried(mock):
    ledger = UsageLedger()
    srv, client = mock({"rules": [{"fault": {"context_length": True}}]}, ledger=ledger)
    with pytest.raises(ContextLengthError) as exc:
        await client.complete(MSGS)
    assert exc.value.kind == "context_length" and "context" in str(exc.value)
    assert len(srv.requests) == 1 and ledger.snapshot()["agent"]["failed_calls"] == 1


async def test_401_is_rejected_at_once_naming_the_key_variable():
    srv = MockLLMServer({"rules": [{"fault": {"status": 401, "message": "Incorrect API key"}}]})
    with srv:
        cfg = RoleConfig(base_url=srv.base_url, model="m", api_key_env="MY_KEY", **FAST)
        client = make_client("evolve", cfg, env={"MY_KEY": "sk-secret"})
        ev = Events()
        with pytest.raises(InfrastructureError) as exc:
            await client.complete(MSGS, on_event=ev)
        await client.aclose()
        assert exc.value.kind == "llm_rejected" and "MY_KEY" in str(exc.value) and "API key" in str(exc.value)
        assert "sk-secret" not in str(exc.value)
        assert len(srv.requests) == 1 and ev == []


async def test_other_4xx_is_rejected_without_retry(mock):
    srv, client = mock({"rules": [{"fault": {"status": 404, "message": "model not found"}}]})
    with pytest.raises(InfrastructureError) as exc:
        await client.complete(MSGS)
    assert exc.value.kind == "llm_rejected" and "HTTP 404" in str(exc.value) and len(srv.requests) == 1


async def test_max_tokens_is_renamed_when_the_model_asks_for_max_completion_tokens(mock):
    message = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    srv, client = mock({"rules": [{"times": 1, "fault": {"status": 400, "message": message}}, {"reply": "ok"}]})
    ev = Events()
    resp = await client.complete(MSGS, settings=LLMSettings(max_tokens=50), on_event=ev)
    assert resp.content == "ok" and ev.kinds() == ["llm_param_adjusted"]
    assert srv.requests[1]["max_completion_tokens"] == 50 and "max_tokens" not in srv.requests[1]
    await client.complete(MSGS, settings=LLMSettings(max_tokens=60))  # remembered for later calls
    assert srv.requests[2]["max_completion_tokens"] == 60


async def test_malformed_tool_arguments_repaired_or_returned_as_error(mock):
    srv, client = mock({"rules": [{"tool_calls": [
        {"name": "sh", "arguments": '{"cmd": "ls",}'},
        {"name": "write", "arguments": '{"path": "/app/out.txt", "text": "hi'},
        {"name": "sh", "arguments": "{'cmd': 'ls'}"},
        {"name": "sh", "arguments": '["ls"]'},
        {"name": "noargs", "arguments": ""},
    ]}]})
    ev = Events()
    resp = await client.complete(MSGS, on_event=ev)
    fixed, closed, bad, array, empty = resp.tool_calls
    assert fixed.arguments == {"cmd": "ls"} and fixed.repaired and fixed.raw_arguments == '{"cmd": "ls"}'
    assert closed.arguments == {"path": "/app/out.txt", "text": "hi"} and closed.repaired
    assert bad.arguments is None and not bad.repaired and "not valid JSON" in bad.parse_error
    assert bad.raw_arguments == "{'cmd': 'ls'}"
    assert array.arguments is None and "JSON object" in array.parse_error
    assert empty.arguments == {} and empty.repaired
    repairs = [d for k, d in ev if k == "tool_args_repaired"]
    assert [d["tool"] for d in repairs] == ["sh", "write", "noargs"]
    assert repairs[0]["repairs"] == ["remove_trailing_commas"] and repairs[0]["raw_arguments"] == '{"cmd": "ls",}'


async def test_cost_from_price_table_and_ledger_totals(mock):
    ledger = UsageLedger()
    prices = {"mock-strong": Price(input=2.0, output=10.0, cached_input=1.0)}
    srv, client = mock({"rules": [{"reply": "x", "usage": {"prompt_tokens": 1000, "completion_tokens": 100,
                                                            "cached_tokens": 400, "reasoning_tokens": 30}}]},
                       ledger=ledger, prices=prices)
    resp = await client.complete(MSGS)
    u = resp.usage
    assert (u.prompt_tokens, u.completion_tokens, u.cached_tokens, u.reasoning_tokens) == (1000, 100, 400, 30)
    assert u.cost_usd == pytest.approx((600 * 2.0 + 400 * 1.0 + 100 * 10.0) / 1e6)
    await client.complete(MSGS)
    row = ledger.snapshot()["agent"]
    assert (row["calls"], row["attempts"], row["prompt_tokens"], row["completion_tokens"]) == (2, 2, 2000, 200)
    assert (row["cached_tokens"], row["reasoning_tokens"], row["total_tokens"]) == (800, 60, 2200)
    assert row["cost_usd"] == pytest.approx(2 * 0.0026) and row["latency_sec"] > 0


async def test_cached_tokens_priced_at_input_when_no_cached_price(mock):
    srv, client = mock({"rules": [{"reply": "x", "usage": {"prompt_tokens": 1000, "completion_tokens": 0,
                                                            "cached_tokens": 400}}]},
                       prices={"mock-strong": Price(input=3.0, output=0.0)})
    assert (await client.complete(MSGS)).usage.cost_usd == pytest.approx(1000 * 3.0 / 1e6)


async def test_concurrent_calls_overlap(mock):
    srv, client = mock({"latency_sec": 0.3, "rules": [{"reply": "ok"}]})
    t0 = time.monotonic()
    got = await asyncio.gather(*[client.complete([{"role": "user", "content": str(i)}]) for i in range(20)])
    assert [r.content for r in got] == ["ok"] * 20 and time.monotonic() - t0 < 2.0


def test_one_client_works_across_event_loops():
    async def call(client):
        try:
            return (await client.complete(MSGS)).content
        finally:
            await client.aclose()

    with MockLLMServer({"rules": [{"reply": "ok"}]}) as srv:
        client = make_client("agent", RoleConfig(base_url=srv.base_url, model="m"), env={})
        assert asyncio.run(call(client)) == "ok"
        assert asyncio.run(call(client)) == "ok"


async def test_a_failing_event_observer_does_not_break_the_call(mock):
    srv, client = mock({"rules": [{"times": 1, "fault": {"status": 503}}, {"reply": "ok"}]})

    def boom(kind, data):
        raise RuntimeError("observer bug")

    assert (await client.complete(MSGS, on_event=boom)).content == "ok"


# --- backoff and headers ------------------------------------------------------------------------


def test_backoff_is_exponential_with_full_jitter_and_capped():
    cfg = RoleConfig(backoff_initial_sec=1.0, backoff_max_sec=5.0)
    rng = random.Random(0)
    for failures, cap in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)]:
        waits = [backoff_delay(failures, cfg, rng) for _ in range(200)]
        assert 0 <= min(waits) and max(waits) <= cap and max(waits) > cap * 0.8
    assert backoff_delay(1, cfg, rng, retry_after=3.0) == 3.0
    assert backoff_delay(1, cfg, rng, retry_after=99.0) == 5.0


def test_retry_after_header_forms():
    assert retry_after_seconds({"retry-after": "7"}) == 7.0
    assert retry_after_seconds({"retry-after": "1.5", "retry-after-ms": "250"}) == 0.25
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 27 <= retry_after_seconds({"retry-after": date}) <= 31
    assert retry_after_seconds({"retry-after": email.utils.formatdate(time.time() - 30, usegmt=True)}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None and retry_after_seconds({}) is None


# --- roles -----------------------------------------------------------------------------------


def test_resolve_role_defaults_and_overrides():
    env = {"OPENAI_BASE_URL": "http://h:1/v1/", "OPENAI_API_KEY": "k0", "AHE_MODEL": "base", "OTHER": "k1"}
    ep = resolve_role("agent", None, env)
    assert (ep.base_url, ep.api_key, ep.model, ep.api_key_env) == ("http://h:1/v1", "k0", "base", "OPENAI_API_KEY")
    ep = resolve_role("evolve", RoleConfig(base_url="http://x/v1", api_key_env="OTHER", model="big"), env)
    assert (ep.base_url, ep.api_key, ep.model, ep.api_key_env) == ("http://x/v1", "k1", "big", "OTHER")
    assert "k1" not in repr(ep)
    ep = resolve_role("agent", None, {"AHE_MODEL": "local"})
    assert ep.api_key == NO_KEY and ep.base_url == "https://api.openai.com/v1"


def test_resolve_role_errors_name_the_variable_and_role():
    with pytest.raises(ConfigError, match=r"AHE_MODEL.*debugger|debugger.*AHE_MODEL"):
        resolve_role("debugger", RoleConfig(), {})
    with pytest.raises(ConfigError, match="MISSING_KEY"):
        resolve_role("agent", RoleConfig(model="m", api_key_env="MISSING_KEY"), {})


# --- ledger ---------------------------------------------------------------------------------


def test_ledger_is_thread_safe_and_merges():
    ledger = UsageLedger()
    usage = Usage(prompt_tokens=10, completion_tokens=5, cached_tokens=2, reasoning_tokens=1, cost_usd=0.5)

    def work():
        for _ in range(500):
            ledger.record("agent", usage, attempts=2, latency_sec=0.01)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ledger.record_failure("debugger", attempts=3, latency_sec=1.0)
    snap = ledger.snapshot()
    assert snap["agent"]["calls"] == 4000 and snap["agent"]["attempts"] == 8000
    assert snap["agent"]["prompt_tokens"] == 40000 and snap["agent"]["cost_usd"] == pytest.approx(2000.0)
    assert snap["debugger"] == {**snap["debugger"], "calls": 0, "failed_calls": 1, "attempts": 3, "total_tokens": 0}
    other = UsageLedger()
    other.record("debugger", usage)
    other.merge(ledger)
    other.merge(ledger.snapshot())
    merged = other.snapshot()
    assert merged["agent"]["calls"] == 8000 and merged["debugger"]["calls"] == 1
    assert merged["debugger"]["failed_calls"] == 2
    assert ledger.totals()["attempts"] == 8003


def test_client_satisfies_the_protocol_attributes():
    client = OpenAIModelClient("agent", ResolvedEndpoint("http://127.0.0.1:9/v1", "k", "m"), RoleConfig())
    assert client.role == "agent" and client.model == "m"


def test_ahe_run_against_a_closed_port_is_one_sentence_and_a_failing_exit(tmp_path):
    """Issue 34: on a refused connection `ahe run` names the endpoint in one sentence and exits
    non-zero, with no traceback, whatever the openai SDK release (3.63 broke errors built by hand)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "x", "AHE_MODEL": "m"}
    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "run", "--workspace", str(repo / "harness_workspace"),
                           "--instruction", "write hello to a.txt", "--out", str(tmp_path / "run"), "--isolation", "none"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert f"error: The model endpoint http://127.0.0.1:{port}/v1" in proc.stderr
    # the unisolated run is said once (it was twice: the log and the `warnings` copy)
    assert proc.stderr.count("NO isolation") == 1, proc.stderr
