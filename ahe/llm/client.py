"""The model client: chat completions over any OpenAI-compatible endpoint, with our own retries.

The SDK's retries are off (`max_retries=0`) so that every retry is decided here, reported
through `on_event("llm_retry", ...)` and counted; after `max_attempts` the failure becomes an
InfrastructureError, which rollouts count apart from the agent's own failures. Responses are
read raw and decoded here, so a body that is not a completion is a retryable "garbage" error
instead of an exception from deep inside the SDK. The SDK still does transport, auth,
timeouts and error mapping; only its per-request parameter transform is skipped (see `complete`).
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import logging
import random
import secrets
import threading
import time
import weakref
from typing import Any, Awaitable, Callable, Mapping

import openai

from ahe.errors import ContextLengthError, InfrastructureError
from ahe.llm import transport
from ahe.llm.roles import ResolvedEndpoint
from ahe.llm.tool_args import parse_tool_arguments
from ahe.llm.types import LLMSettings, ModelResponse, RoleConfig, ToolCall
from ahe.llm.usage import UsageLedger, cost_of, price_for, usage_from_response

log = logging.getLogger(__name__)
EventFn = Callable[[str, dict[str, Any]], None]
RETRY_STATUSES = frozenset({408, 409, 429})
_CONTEXT_HINTS = ("context_length_exceeded", "maximum context length", "context length", "context window",
                  "exceeds the available context", "prompt is too long", "too many tokens", "input is too long")


# Requests of one event loop are spread over SDK clients of at most POOL_REQUESTS requests at
# once each (a few trials share a pool and its kept-alive connections; one trial alone uses
# one). httpx's connection pool does O(its connections) work — probing the socket of each
# idle connection — whenever a request starts or ends, so one pool shared by the 64–128 trials
# of a rollout costs O(n²) per model turn, all of it in the burst where every trial calls the
# model at once (bench_ray.py; the process's CPU per trial at 64–128 at once fell ~10 %).
POOL_REQUESTS = 8
MAX_POOLS = 32


class _Pool:
    """One SDK client (one connection pool) and how many requests it is serving now."""

    __slots__ = ("sdk", "busy")

    def __init__(self, sdk: openai.AsyncOpenAI) -> None:
        self.sdk, self.busy = sdk, 0


@functools.lru_cache(maxsize=1)
def _ssl_context() -> Any:
    """The SDK's default TLS context, made once per process (loading the CA bundle costs ~50 ms;
    every pool shares it)."""
    return transport.sdk_httpx().create_ssl_context()


class BadResponse(Exception):
    """A 2xx answer that is not a usable chat completion."""


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, else `Retry-After` (seconds or HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_delay(failures: int, cfg: RoleConfig, rng: random.Random, retry_after: float | None = None) -> float:
    """Retry-After when given, else exponential backoff with full jitter; both capped by backoff_max_sec."""
    if retry_after is not None:
        return min(retry_after, cfg.backoff_max_sec)
    return rng.uniform(0.0, min(cfg.backoff_max_sec, cfg.backoff_initial_sec * 2 ** (failures - 1)))


def _error_text(exc: openai.APIStatusError) -> str:
    body = exc.body
    msg = body.get("message") if isinstance(body, dict) else body
    text = str(msg or exc.message or "").strip().replace("\n", " ")
    return text[:300] + ("…" if len(text) > 300 else "")


def is_context_length_error(exc: openai.APIStatusError) -> bool:
    if exc.status_code == 413:
        return True
    if exc.status_code not in (400, 422):
        return False
    body = exc.body if isinstance(exc.body, dict) else {}
    hay = " ".join(str(x) for x in (exc.code, body.get("type"), body.get("message"), exc.message)).lower()
    return any(h in hay for h in _CONTEXT_HINTS)


def _content_text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def decode_completion(raw: bytes) -> dict[str, Any]:
    """The parsed body, or BadResponse when it is not a chat completion with a message."""
    try:
        data = json.loads(raw)
    except ValueError:
        raise BadResponse(f"body is not JSON ({raw[:80]!r})") from None
    if not isinstance(data, dict):
        raise BadResponse("body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        err = data.get("error")
        if isinstance(err, dict):
            raise BadResponse(f"error in a 200 answer: {str(err.get('message'))[:200]}")
        raise BadResponse("no choices")
    if not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
        raise BadResponse("the first choice has no message")
    return data


class OpenAIModelClient:
    """Implements `ahe.llm.types.ModelClient`. `rng` and `sleep` are injectable for tests."""

    def __init__(self, role: str, endpoint: ResolvedEndpoint, cfg: RoleConfig, ledger: UsageLedger | None = None,
                 *, rng: random.Random | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.role = role
        self.model = endpoint.model
        self.endpoint = endpoint
        self.cfg = cfg
        self.ledger = ledger
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._lock = threading.Lock()
        self._sdks: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[_Pool]]" = weakref.WeakKeyDictionary()
        self._leans: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]" = weakref.WeakKeyDictionary()
        self._lean_ok = transport.usable(endpoint.base_url)  # the lean transport (ahe/llm/transport.py)
        self._renamed: dict[str, str] = {}  # params the endpoint wants under another name
        self._dropped: set[str] = set()  # params the endpoint refuses for this model

    def _pool(self) -> "_Pool":
        """An SDK client of this event loop with room for one more request (see `_Pool`)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            pools = self._sdks.setdefault(loop, [])
            for pool in pools:  # the first with room: a few trials at once share one pool and its connections
                if pool.busy < POOL_REQUESTS:
                    return pool
            if len(pools) < MAX_POOLS:
                http = openai.DefaultAsyncHttpxClient(verify=_ssl_context())
                pools.append(_Pool(openai.AsyncOpenAI(base_url=self.endpoint.base_url, api_key=self.endpoint.api_key,
                                                      max_retries=0, timeout=self.cfg.timeout_sec, http_client=http)))
                return pools[-1]
            return min(pools, key=lambda p: p.busy)

    def _lean(self) -> "transport.LeanTransport | None":
        """This event loop's lean transport, or None where only the SDK's will do."""
        if not self._lean_ok:
            return None
        loop = asyncio.get_running_loop()
        with self._lock:
            lean = self._leans.get(loop, False)
        if lean is False:
            headers = transport.sdk_headers(self._pool().sdk, self.cfg.timeout_sec)
            lean = None if headers is None else transport.LeanTransport(
                self.endpoint.base_url, headers, _ssl_context() if self.endpoint.base_url.startswith("https") else None)
            with self._lock:
                self._leans[loop] = lean
        return lean

    async def _post(self, kw: dict[str, Any]) -> bytes:
        """One attempt: the raw body of a 2xx answer; transport.ConnectionFailed or an SDK exception otherwise."""
        lean = self._lean()
        if lean is not None:
            try:
                # transport.ConnectionFailed (our own error) propagates: an SDK exception built
                # by hand breaks across SDK releases (openai 3.63 requires a real request)
                answer = await lean.post(transport.encode_body(kw))
            except transport.Unsuitable:
                answer = None  # this one through the SDK
            if answer is not None and 200 <= answer.status < 300:
                return answer.body
            if answer is not None and answer.status >= 400:
                raise transport.status_error(self._pool().sdk, answer, lean.url)
        # `post` rather than `chat.completions.create`: the latter walks every message
        # through the SDK's type-driven transform, ~1 ms per turn of history per call.
        pool = self._pool()
        pool.busy += 1
        try:
            return await pool.sdk.post("/chat/completions", body=kw, cast_to=bytes,
                                       options={"timeout": self.cfg.timeout_sec})
        finally:
            pool.busy -= 1

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            pools = self._sdks.pop(loop, [])
            lean = self._leans.pop(loop, None)
        if lean:
            lean.close()
        for pool in pools:
            await pool.sdk.close()

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 settings: LLMSettings | None) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            kw["tools"] = tools
        if settings is not None:
            for name in ("temperature", "top_p", "max_tokens", "reasoning_effort"):
                value = getattr(settings, name)
                if value is not None and name not in self._dropped:
                    kw[self._renamed.get(name, name)] = value
        for name, value in self.cfg.params.items():
            if name not in self._dropped:
                kw.pop(name, None)
                kw[self._renamed.get(name, name)] = value
        return kw

    def _adjust(self, exc: openai.APIStatusError, kw: dict[str, Any], on_event: EventFn | None) -> bool:
        """Fix a 400 that names a parameter the model does not take (e.g. max_tokens on reasoning models)."""
        if exc.status_code != 400:
            return False
        text = _error_text(exc).lower()
        if "max_tokens" in kw and "max_completion_tokens" in text:
            self._renamed["max_tokens"] = "max_completion_tokens"
            kw["max_completion_tokens"] = kw.pop("max_tokens")
            change = "max_tokens sent as max_completion_tokens"
        else:
            name = next((p for p in ("temperature", "top_p") if p in kw and p in text
                         and ("unsupported" in text or "not support" in text)), None)
            if name is None:
                return False
            self._dropped.add(name)
            kw.pop(name)
            change = f"{name} no longer sent"
        self._emit(on_event, "llm_param_adjusted", {"role": self.role, "model": self.model, "change": change,
                                                     "error": _error_text(exc)})
        return True

    def _emit(self, on_event: EventFn | None, kind: str, data: dict[str, Any]) -> None:
        if on_event is None:
            return
        try:
            on_event(kind, data)
        except Exception:  # an observer must never break a model call
            log.exception("on_event(%s) failed", kind)

    def _fail(self, message: str, attempts: int, t0: float, kind: str = "llm") -> InfrastructureError:
        if self.ledger is not None:
            self.ledger.record_failure(self.role, attempts=attempts, latency_sec=time.monotonic() - t0)
        if kind == "context_length":
            return ContextLengthError(message)
        return InfrastructureError(message, kind=kind)

    async def complete(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                       settings: LLMSettings | None = None, on_event: EventFn | None = None) -> ModelResponse:
        kw = self._request(messages, tools, settings)
        where = f"model endpoint {self.endpoint.base_url} (role {self.role}, model {self.model})"
        t0 = time.monotonic()
        attempts = failures = 0
        while True:
            attempts += 1
            retry_after = None
            try:
                async with asyncio.timeout(self.cfg.timeout_sec):  # whole attempt, not per read
                    raw = await self._post(kw)
                data = decode_completion(raw)
            except openai.APIStatusError as exc:
                status = exc.status_code
                if is_context_length_error(exc):
                    raise self._fail(f"The {where} refused the request because the conversation is longer than "
                                     f"the model's context ({_error_text(exc)}).", attempts, t0, "context_length") from None
                if self._adjust(exc, kw, on_event):
                    continue
                if status in (401, 403):
                    raise self._fail(f"The {where} rejected the request with HTTP {status} ({_error_text(exc)}); "
                                     f"check the API key in {self.endpoint.api_key_env}.", attempts, t0, "llm_rejected") from None
                if status < 500 and status not in RETRY_STATUSES:
                    raise self._fail(f"The {where} rejected the request with HTTP {status} ({_error_text(exc)}); "
                                     f"it is not retried.", attempts, t0, "llm_rejected") from None
                last, retry_after = f"HTTP {status} ({_error_text(exc)})", retry_after_seconds(exc.response.headers)
            except (openai.APITimeoutError, TimeoutError):
                last, status = f"no answer within timeout_sec={self.cfg.timeout_sec:g}", None
            except openai.APIConnectionError as exc:
                last, status = f"connection error ({exc.__cause__ or exc})", None
            except transport.ConnectionFailed as exc:
                last, status = f"connection error ({exc})", None
            except BadResponse as exc:
                last, status = f"invalid response: {exc}", None
            else:
                return self._response(data, attempts, t0, on_event)
            failures += 1
            if failures >= self.cfg.max_attempts:
                raise self._fail(f"The {where} still failed after {attempts} attempts; last error: {last}.",
                                 attempts, t0) from None
            wait = backoff_delay(failures, self.cfg, self._rng, retry_after)
            self._emit(on_event, "llm_retry", {
                "role": self.role, "model": self.model, "attempt": attempts, "max_attempts": self.cfg.max_attempts,
                "status": status, "error": last, "wait_sec": round(wait, 3), "retry_after": retry_after,
            })
            await self._sleep(wait)

    def _response(self, data: dict[str, Any], attempts: int, t0: float, on_event: EventFn | None) -> ModelResponse:
        choice = data["choices"][0]
        msg = choice["message"]
        calls = []
        for tc in msg.get("tool_calls") or ():
            tc = tc if isinstance(tc, dict) else {}
            fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
            name = str(fn.get("name") or "")
            raw = fn.get("arguments")
            parsed = parse_tool_arguments(raw, name)
            raw_text = raw if isinstance(raw, str) else ("" if raw is None else json.dumps(raw, ensure_ascii=False))
            call = ToolCall(id=str(tc.get("id") or f"call_{secrets.token_hex(6)}"), name=name, raw_arguments=raw_text,
                            arguments=parsed.arguments, parse_error=parsed.error, repaired=parsed.repaired)
            if parsed.repaired:
                # what goes back into the conversation is the repaired JSON: strict servers reject bad history
                call.raw_arguments = json.dumps(parsed.arguments, ensure_ascii=False)
                self._emit(on_event, "tool_args_repaired", {"tool": name, "id": call.id, "repairs": parsed.repairs,
                                                            "raw_arguments": raw_text[:2000]})
            calls.append(call)
        usage = usage_from_response(data.get("usage"))
        price = price_for(self.cfg.prices, self.model, data.get("model"))
        if price is not None:
            usage.cost_usd = cost_of(usage, price)
        latency = time.monotonic() - t0
        if self.ledger is not None:
            self.ledger.record(self.role, usage, attempts=attempts, latency_sec=latency)
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        return ModelResponse(
            content=_content_text(msg.get("content")),
            reasoning_content=reasoning if isinstance(reasoning, str) else None,
            tool_calls=calls, finish_reason=choice.get("finish_reason"), model=data.get("model"),
            usage=usage, latency_sec=latency, attempts=attempts,
        )
