"""The gateway's OpenAI face (ahe/confine/openai_face.py), spoken to by the real openai SDK over its
unix socket, in front of a real gateway and the scripted mock model over HTTP: plain and streamed
answers (tool calls included) as the SDK parses them, the gateway's record and meter, refusals,
the budget, and a socket path longer than AF_UNIX allows."""

from __future__ import annotations

import json
import os
from pathlib import Path

try:
    import httpx2 as httpx  # the openai SDK's own transport (this project pins an SDK built on httpx2)
except ImportError:
    import httpx
import openai
import pytest

from ahe.confine.gateway import GatewayBudget, ModelGateway
from ahe.confine.openai_face import OpenAIFace

POLICY = {"name": "face", "rules": [
    {"match": {"turn": 1}, "tool_calls": [{"name": "run_shell_command", "arguments": {"command": "ls -la /app"}}],
     "usage": {"prompt_tokens": 100, "completion_tokens": 20}},
    {"match": {"turn_min": 2}, "reply": "All done.", "usage": {"prompt_tokens": 150, "completion_tokens": 5}}]}
TOOLS = [{"type": "function", "function": {"name": "run_shell_command", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}}]
STRICT_TOOLS = [{"type": "function", "function": {"name": "run_shell_command", "strict": True, "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"], "additionalProperties": False}}}]


_FOLDERS: list[int] = []


def _sdk(sock: Path) -> openai.AsyncOpenAI:
    """The SDK over the socket, reached through /proc/self/fd as the forwarder does (a test's
    temporary folder can be longer than AF_UNIX's 108 bytes)."""
    folder = os.open(sock.parent, os.O_PATH | os.O_DIRECTORY)
    _FOLDERS.append(folder)  # closed with the face (_close)
    transport = httpx.AsyncHTTPTransport(uds=f"/proc/self/fd/{folder}/{sock.name}")
    return openai.AsyncOpenAI(base_url="http://gateway/v1", api_key="dummy", max_retries=0,
                              http_client=httpx.AsyncClient(transport=transport))


async def _face(tmp_path: Path, mock_llm, budget: GatewayBudget | None = None, folder: str = "ch"):
    gateway = ModelGateway(mock_llm(POLICY).client(), record_dir=tmp_path, budget=budget)
    face = OpenAIFace(gateway, tmp_path / folder / "gateway.sock", model="mock")
    await face.start()
    return gateway, face


async def _close(face: OpenAIFace, gateway: ModelGateway) -> None:
    await face.close()
    gateway.close()
    while _FOLDERS:
        os.close(_FOLDERS.pop())


async def test_the_sdk_gets_plain_and_streamed_answers_with_tool_calls(tmp_path: Path, mock_llm) -> None:
    gateway, face = await _face(tmp_path, mock_llm)
    sdk = _sdk(face.path)
    try:
        messages = [{"role": "user", "content": "list /app"}]
        first = await sdk.chat.completions.create(model="mock", messages=messages, tools=TOOLS)
        call = first.choices[0].message.tool_calls[0]
        assert call.function.name == "run_shell_command" and json.loads(call.function.arguments) == {"command": "ls -la /app"}
        assert first.choices[0].finish_reason == "tool_calls" and first.usage.prompt_tokens == 100
        messages += [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "hello.txt"}]
        stream = await sdk.chat.completions.create(model="mock", messages=messages, tools=TOOLS, stream=True,
                                                   stream_options={"include_usage": True})
        text, usage = "", None
        async for chunk in stream:
            text += "".join(c.delta.content or "" for c in chunk.choices)
            usage = chunk.usage or usage
        assert text == "All done." and usage.prompt_tokens == 150
        # the SDK's own stream accumulator sees the tool call of a streamed first turn (before
        # openai 1.7x it is under `beta` and parses strict tools only; both are the SDK's helper)
        completions, tools = sdk.chat.completions, TOOLS
        if not hasattr(completions, "stream"):
            completions, tools = sdk.beta.chat.completions, STRICT_TOOLS
        async with completions.stream(model="mock", messages=messages[:1], tools=tools) as s:
            final = await s.get_final_completion()
        assert final.choices[0].message.tool_calls[0].function.name == "run_shell_command"
        models = await sdk.models.list()
        assert [m.id for m in models.data] == ["mock"]
    finally:
        await _close(face, gateway)
    assert gateway.calls == 3 and gateway.usage.prompt_tokens == 350  # the meter is the gateway's
    rows = [json.loads(line) for line in (tmp_path / "conversation.jsonl").read_text().splitlines()]
    assert [r["call"] for r in rows] == [1, 2, 3] and rows[1]["messages"][-1]["content"] == "hello.txt"
    assert not face.path.exists()  # the socket goes with the face


async def test_other_paths_and_a_spent_budget_are_refused(tmp_path: Path, mock_llm) -> None:
    gateway, face = await _face(tmp_path, mock_llm, GatewayBudget(max_requests=1))
    sdk = _sdk(face.path)
    try:
        with pytest.raises(openai.NotFoundError, match="serves only POST /v1/chat/completions"):
            await sdk.embeddings.create(model="mock", input="x")
        await sdk.chat.completions.create(model="mock", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.BadRequestError, match="budget of 1 requests is spent"):
            await sdk.chat.completions.create(model="mock", messages=[{"role": "user", "content": "again"}])
    finally:
        await _close(face, gateway)
    assert gateway.refusals == ["POST /v1/embeddings is not served (only chat completions)",
                                "the trial's model budget of 1 requests is spent"]


async def test_a_socket_path_past_the_af_unix_limit_still_binds(tmp_path: Path, mock_llm) -> None:
    deep = "d" * 60 + "/" + "e" * 60
    gateway, face = await _face(tmp_path, mock_llm, folder=deep)
    assert len(str(face.path)) > 108
    try:
        out = await _sdk(face.path).chat.completions.create(model="mock", messages=[{"role": "user", "content": "x"}],
                                                             tools=TOOLS)
        assert out.choices[0].message.tool_calls
    finally:
        await _close(face, gateway)
