"""The MOCK model server over real HTTP: conditions, `times`, templates, usage, streaming, faults."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import math
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import openai
import pytest

from ahe.errors import ConfigError
from ahe.testing import MockLLMServer, Policy, load_policy

ROOT = Path(__file__).resolve().parents[1]


def msgs(first="fix the bug", system="You are an agent.", results=(), last_user=None):
    """A conversation: system, first user message, one assistant tool call + tool result per result."""
    out = [{"role": "system", "content": system}, {"role": "user", "content": first}]
    for i, r in enumerate(results):
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": json.dumps({"cmd": f"step {i}"})}}]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": r})
    if last_user is not None:
        out.append({"role": "user", "content": last_user})
    return out


def tools(*names):
    return [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in names]


def post(srv, body, timeout=10):
    req = urllib.request.Request(srv.base_url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def chat(srv, messages, model="m", tool_names=(), **extra):
    body = {"model": model, "messages": messages, **extra}
    if tool_names:
        body["tools"] = tools(*tool_names)
    status, _, raw = post(srv, body)
    assert status == 200, raw
    return json.loads(raw)


def reply(srv, messages, **kw):
    return chat(srv, messages, **kw)["choices"][0]["message"]["content"]


# --- conditions ------------------------------------------------------------------------------

CASES = [
    ({"model": "strong"}, dict(model="strong"), dict(model="weak")),
    ({"model": ["a", "strong-*"]}, dict(model="strong-2"), dict(model="weak-2")),
    ({"system_contains": ["lesson A", "lesson B"]}, dict(system="x lesson A y lesson B"), dict(system="lesson A only")),
    ({"system_not_contains": "bad habit"}, dict(system="good"), dict(system="has a bad habit")),
    ({"messages_contain": "needle"}, dict(results=["a needle here"]), dict(results=["hay"])),
    ({"messages_not_contain": "needle"}, dict(results=["hay"]), dict(first="needle task")),
    ({"first_user_contains": "write"}, dict(first="please write x"), dict(first="read", last_user="write")),
    ({"last_user_contains": "again"}, dict(last_user="again please"), dict(first="again", last_user="no")),
    ({"last_tool_result_contains": "exit 0"}, dict(results=["exit 1", "exit 0"]), dict(results=["exit 0", "exit 1"])),
    ({"last_tool_result_regex": r"exit \d"}, dict(results=["exit 3"]), dict()),
    ({"last_tool_result_not_contains": "error"}, dict(results=["ok"]), dict(results=["error: x"])),
    ({"last_tool_result_not_contains": "error"}, dict(), dict(results=["an error"])),
    ({"tools_include": ["a", "b"]}, dict(tool_names=("a", "b", "c")), dict(tool_names=("a",))),
    ({"tools_exclude": "c"}, dict(tool_names=("a",)), dict(tool_names=("a", "c"))),
    ({"turn": 2}, dict(results=["r"]), dict()),
    ({"turn_min": 2, "turn_max": 3}, dict(results=["r", "r"]), dict(results=["r", "r", "r"])),
    ({"turn_min": 2}, dict(results=["r"]), dict()),
]


def _request(spec):
    spec = dict(spec)
    kw = {k: spec.pop(k) for k in ("model", "tool_names") if k in spec}
    return msgs(**spec), kw


@pytest.mark.parametrize("match,yes,no", CASES, ids=[json.dumps(c[0]) for c in CASES])
def test_each_condition_matches_and_refuses(match, yes, no):
    with MockLLMServer({"rules": [{"match": match, "reply": "hit"}], "default": {"reply": "miss"}}) as srv:
        m, kw = _request(yes)
        assert reply(srv, m, **kw) == "hit"
        m, kw = _request(no)
        assert reply(srv, m, **kw) == "miss"


def test_rules_are_tried_in_order_and_all_conditions_must_hold():
    policy = {"rules": [
        {"name": "both", "match": {"turn": 1, "system_contains": "L1"}, "reply": "both"},
        {"name": "turn-only", "match": {"turn": 1}, "reply": "turn"},
    ]}
    with MockLLMServer(policy) as srv:
        assert reply(srv, msgs(system="L1")) == "both"
        assert reply(srv, msgs(system="L2")) == "turn"
        assert reply(srv, msgs(results=["x"])) == "mock: no rule matched"
        assert srv.hits == {"both": 1, "turn-only": 1, "default": 1}


def test_content_parts_and_developer_messages_count_as_system_text():
    with MockLLMServer({"rules": [{"match": {"system_contains": ["part two", "dev note"]}, "reply": "hit"}]}) as srv:
        m = [{"role": "system", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]},
             {"role": "developer", "content": "dev note"}, {"role": "user", "content": "go"}]
        assert reply(srv, m) == "hit"


def test_times_counts_per_conversation_by_default():
    with MockLLMServer({"rules": [{"times": 2, "reply": "limited"}], "default": {"reply": "after"}}) as srv:
        a = msgs(first="task A")
        assert [reply(srv, a) for _ in range(3)] == ["limited", "limited", "after"]
        assert reply(srv, msgs(first="task B")) == "limited"  # a new conversation has its own count
        assert reply(srv, msgs(first="task A", results=["r"])) == "after"  # same system + first user = same one
        srv.reset()
        assert reply(srv, a) == "limited"


def test_times_with_global_scope_counts_across_conversations():
    with MockLLMServer({"rules": [{"times": 2, "scope": "global", "reply": "limited"}],
                        "default": {"reply": "after"}}) as srv:
        got = [reply(srv, msgs(first=f"task {i}")) for i in range(3)]
        assert got == ["limited", "limited", "after"]


def test_times_is_exact_under_concurrency():
    with MockLLMServer({"rules": [{"times": 5, "scope": "global", "reply": "x"}], "default": {"reply": "y"}}) as srv:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            got = list(pool.map(lambda i: reply(srv, msgs(first=str(i))), range(40)))
        assert got.count("x") == 5


# --- responses, templates, usage -------------------------------------------------------------------


def test_templates_render_turn_instruction_result_regex_groups_and_model():
    policy = {"rules": [{
        "match": {"last_tool_result_regex": r"wrote (?P<n>\d+) bytes to (\S+)"},
        "reply": "t={{ turn }} i={{ instruction }} m={{ model }} n={{ match.n }} f={{ match[2] }} r={{ last_tool_result }}",
        "tool_calls": [{"name": "sh", "arguments": {"cmd": "cat {{ match[2] }}", "n": ["{{ turn }}", 3], "flag": True}},
                       {"name": "raw", "arguments": '{"cmd": "{{ turn }}", '}],
    }]}
    with MockLLMServer(policy) as srv:
        out = chat(srv, msgs(first="the task", results=["wrote 12 bytes to /app/x"]), model="weak")
        msg = out["choices"][0]["message"]
        assert msg["content"] == "t=2 i=the task m=weak n=12 f=/app/x r=wrote 12 bytes to /app/x"
        first, second = msg["tool_calls"]
        assert first["id"] == "call_2_0" and second["id"] == "call_2_1"
        assert json.loads(first["function"]["arguments"]) == {"cmd": "cat /app/x", "n": ["2", 3], "flag": True}
        assert second["function"]["arguments"] == '{"cmd": "{{ turn }}", '  # raw strings are verbatim
        assert out["choices"][0]["finish_reason"] == "tool_calls"


def test_usage_is_deterministic_from_request_and_answer_sizes():
    policy = {"rules": [{"reply": "hello world", "tool_calls": [{"name": "sh", "arguments": {"cmd": "ls"}}]}]}
    with MockLLMServer(policy) as srv:
        m, t = msgs(), tools("sh")
        usage = chat(srv, m, tool_names=("sh",))["usage"]
        chars = len(json.dumps(m, separators=(",", ":"))) + len(json.dumps(t, separators=(",", ":")))
        assert usage["prompt_tokens"] == math.ceil(chars / 4)
        assert usage["completion_tokens"] == math.ceil((len("hello world") + len('{"cmd": "ls"}')) / 4)
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert chat(srv, m, tool_names=("sh",))["usage"] == usage


def test_usage_override_reasoning_and_finish_reason():
    policy = {"rules": [{"reply": "x", "reasoning": "12345678", "finish_reason": "length",
                         "usage": {"prompt_tokens": 1000, "cached_tokens": 400}}]}
    with MockLLMServer(policy) as srv:
        out = chat(srv, msgs())
        u = out["usage"]
        assert (u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"]) == (1000, 400)
        assert u["completion_tokens_details"]["reasoning_tokens"] == 2 and u["completion_tokens"] == 1 + 2
        assert out["choices"][0]["message"]["reasoning_content"] == "12345678"
        assert out["choices"][0]["finish_reason"] == "length"


def test_streaming_with_content_tool_call_deltas_and_usage_chunk():
    policy = {"rules": [{"reply": "a fairly long reply that spans several stream chunks",
                         "tool_calls": [{"name": "sh", "arguments": {"cmd": "echo a long argument string to split"}}]}]}
    with MockLLMServer(policy) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
        stream = client.chat.completions.create(model="m", messages=msgs(), stream=True,
                                                stream_options={"include_usage": True})
        content, args, names, ids, usage, finish, n = "", "", [], [], None, None, 0
        for chunk in stream:
            n += 1
            if chunk.usage:
                usage = chunk.usage
            for choice in chunk.choices:
                content += choice.delta.content or ""
                finish = choice.finish_reason or finish
                for tc in choice.delta.tool_calls or []:
                    args += tc.function.arguments or ""
                    if tc.function.name:
                        names.append(tc.function.name)
                        ids.append(tc.id)
        assert n > 5
        assert content == "a fairly long reply that spans several stream chunks"
        assert json.loads(args) == {"cmd": "echo a long argument string to split"}
        assert names == ["sh"] and ids == ["call_1_0"] and finish == "tool_calls"
        plain = chat(srv, msgs())["usage"]
        assert usage.prompt_tokens == plain["prompt_tokens"] and usage.completion_tokens == plain["completion_tokens"]
        chunks = list(client.chat.completions.create(model="m", messages=msgs(), stream=True))
        assert all(c.usage is None for c in chunks)


def test_default_default_and_models_endpoint_and_request_log():
    with MockLLMServer({"rules": [{"match": {"model": ["strong", "weak*"]}, "reply": "x"}]}) as srv:
        out = chat(srv, msgs(), model="other")
        assert out["choices"][0]["message"] == {"role": "assistant", "content": "mock: no rule matched"}
        with urllib.request.urlopen(srv.base_url + "/models") as r:
            assert [m["id"] for m in json.loads(r.read())["data"]] == ["strong"]
        assert srv.requests[0]["model"] == "other" and srv.requests[0]["messages"] == msgs()
        req = urllib.request.Request(srv.base_url + "/chat/completions", data=b"not json", method="POST")
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(req)
        assert exc.value.code == 400
        exc.value.close()


def test_latency_sleeps_overlap_across_concurrent_requests():
    with MockLLMServer({"latency_sec": 0.3, "rules": [{"reply": "slow"}]}) as srv:
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            got = list(pool.map(lambda i: reply(srv, msgs(first=str(i))), range(20)))
        elapsed = time.monotonic() - t0
        assert got == ["slow"] * 20
        assert 0.3 <= elapsed < 2.0, elapsed  # serial would be 6 s


def test_keep_alive_connection_serves_many_requests():
    with MockLLMServer({"rules": [{"reply": "k"}]}) as srv:
        host, port = srv.base_url.split("//")[1].split("/")[0].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        body = json.dumps({"model": "m", "messages": msgs()})
        for _ in range(50):
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert json.loads(resp.read())["choices"][0]["message"]["content"] == "k"
        conn.close()
        assert len(srv.requests) == 50


# --- faults ------------------------------------------------------------------------------------


def test_status_fault_with_retry_after_headers():
    with MockLLMServer({"rules": [{"fault": {"status": 429, "retry_after": 2, "retry_after_ms": 1500,
                                             "message": "slow down"}}]}) as srv:
        status, headers, raw = post(srv, {"model": "m", "messages": msgs()})
        assert status == 429 and headers["Retry-After"] == "2" and headers["retry-after-ms"] == "1500.0"
        assert json.loads(raw)["error"]["message"] == "slow down"


def test_context_length_fault_looks_like_openai():
    with MockLLMServer({"rules": [{"fault": {"context_length": True}}]}) as srv:
        status, _, raw = post(srv, {"model": "m", "messages": msgs()})
        err = json.loads(raw)["error"]
        assert status == 400 and err["code"] == "context_length_exceeded" and err["type"] == "invalid_request_error"
        assert "maximum context length" in err["message"]


def test_garbage_and_disconnect_faults():
    policy = {"rules": [{"match": {"first_user_contains": "g1"}, "fault": {"garbage": True}},
                        {"match": {"first_user_contains": "g2"}, "fault": {"garbage": "{}"}},
                        {"match": {"first_user_contains": "dc"}, "fault": {"disconnect": True}}]}
    with MockLLMServer(policy) as srv:
        status, _, raw = post(srv, {"model": "m", "messages": msgs(first="g1")})
        assert status == 200
        with pytest.raises(ValueError):
            json.loads(raw)
        assert post(srv, {"model": "m", "messages": msgs(first="g2")})[2] == b"{}"
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError)):
            post(srv, {"model": "m", "messages": msgs(first="dc")})


def test_hang_outlasts_client_timeout_and_stop_is_prompt():
    srv = MockLLMServer({"rules": [{"match": {"first_user_contains": "hang"}, "fault": {"hang_sec": 30}},
                                   {"fault": {"hang_sec": 0.2}, "reply": "late"}]})
    srv.start()
    try:
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            post(srv, {"model": "m", "messages": msgs(first="hang")}, timeout=0.3)
        assert reply(srv, msgs(first="short")) == "late"  # a short hang, then the normal answer
    finally:
        t0 = time.monotonic()
        srv.stop()
        assert time.monotonic() - t0 < 2.0


# --- policy files ------------------------------------------------------------------------------


def _write(tmp_path, text):
    p = tmp_path / "policy.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text,expect", [
    ("rules:\n  - reply: ok\n  - name: second\n    match: {turn_min: many}\n",
     [r'rules\[1\] \("second"\)', "`match.turn_min`", "integer"]),
    ("rules:\n  - match: {sytem_contains: x}\n", [r"rules\[0\]", "`match.sytem_contains`", "system_contains"]),
    ("rules:\n  - reply: '{{ nope }}'\n", [r"rules\[0\]", "`reply`", "nope"]),
    ("rules:\n  - tool_calls: [{name: sh, arguments: {cmd: '{{ turn '}}]\n",
     [r"rules\[0\]", r"`tool_calls\[0\].arguments.cmd`", "Jinja2"]),
    ("rules:\n  - match: {last_tool_result_regex: '('}\n", [r"rules\[0\]", "`match.last_tool_result_regex`"]),
    ("rules:\n  - fault: {status: 429, garbage: true}\n", [r"rules\[0\]", "`fault`", "one kind"]),
    ("rules:\n  - fault: {status: 200}\n", [r"rules\[0\]", "`fault.status`"]),
    ("rules:\n  - times: 0\n", [r"rules\[0\]", "`times`"]),
    ("default: {reply: [1]}\n", ["`default.reply`"]),
    ("rules: [\n", ["not valid YAML", "line"]),
    ("", ["empty"]),
    ("- a\n- b\n", ["mapping"]),
])
def test_policy_errors_name_file_rule_and_field(tmp_path, text, expect):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_policy(path)
    msg = str(exc.value)
    assert str(path) in msg and msg.count(".") >= 1 and "\n" not in msg
    for pattern in expect:
        assert re.search(pattern, msg), (pattern, msg)


def test_missing_policy_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="Cannot read mock policy"):
        MockLLMServer(tmp_path / "nope.yaml")


def _doc_examples():
    """The YAML policies under the '## Example' headings of docs/mock-policy.md, by name."""
    import yaml

    doc = (ROOT / "docs" / "mock-policy.md").read_text()
    out = {}
    for section in doc.split("\n## ")[1:]:
        if section.startswith("Example"):
            for block in re.findall(r"```yaml\n(.*?)```", section, re.DOTALL):
                data = yaml.safe_load(block)
                out[data["name"]] = Policy.from_dict(data, source="docs/mock-policy.md")
    return out


def test_documented_examples_behave_as_described():
    examples = _doc_examples()
    assert set(examples) == {"write-hello", "lesson-gated"}
    tool = ("run_shell_command",)
    with MockLLMServer(examples["write-hello"]) as srv:
        m = msgs(first="Create /app/hello.txt")
        first = chat(srv, m, tool_names=tool)["choices"][0]["message"]
        assert "hello.txt" in first["tool_calls"][0]["function"]["arguments"]
        m += [first, {"role": "tool", "tool_call_id": "call_1_0", "content": "exit code: 0"}]
        second = chat(srv, m, tool_names=tool)["choices"][0]["message"]
        assert "cat /app/hello.txt" in second["tool_calls"][0]["function"]["arguments"]
        m += [second, {"role": "tool", "tool_call_id": "call_2_0", "content": "exit code: 0\nhello from turn 1"}]
        assert reply(srv, m, tool_names=tool) == "Done: /app/hello.txt holds the greeting written on turn 1."
        assert srv.hits == {"write-file": 1, "check-file": 1, "finish": 1}
    with MockLLMServer(examples["lesson-gated"]) as srv:
        def command(system, model):
            out = chat(srv, msgs(system=system), model=model)["choices"][0]["message"]
            return json.loads(out["tool_calls"][0]["function"]["arguments"])["command"]

        lesson = "Memory: write to a temporary file, then rename it."
        assert "mv " in command(lesson, "mock-weak") and "mv " not in command("no memory", "mock-weak")
        assert "mv " in command("no memory", "mock-strong")


# --- CLI --------------------------------------------------------------------------------------


def test_cli_serve_prints_its_url_and_stops_on_ctrl_c(tmp_path):
    path = _write(tmp_path, "rules:\n  - reply: from the cli\n")
    # Ctrl-C as at a terminal: a test run started in the background of a non-interactive shell (`cmd &`, as a CI job
    # may be) ignores SIGINT, the child inherits that, and Python then installs no KeyboardInterrupt of its own
    code = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
            f"from ahe.testing.cli import serve; serve({str(path)!r}, '127.0.0.1', 0)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"MOCK model server (scripted policy {path}) listening on http://127.0.0.1:")
        base_url = line.split()[-1]
        req = urllib.request.Request(base_url + "/chat/completions", headers={"Content-Type": "application/json"},
                                     data=json.dumps({"model": "m", "messages": msgs()}).encode())
        with urllib.request.urlopen(req, timeout=5) as r:
            assert json.loads(r.read())["choices"][0]["message"]["content"] == "from the cli"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
