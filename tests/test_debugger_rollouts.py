"""The debug phase on real rollout folders made by the rollout engine with the scripted model.

Three tasks, two trials each, run once per module (bwrap sandbox, real verifier):
- alpha: both trials pass;
- delta: both trials run the same first command; on turn 2 the first trial writes the
  right word and the second a wrong one (a `times: 1` rule), so they diverge at step 4;
- gamma: both fail after a noisy session: a base64 dump, a long output cut by the shell,
  the same output twice, the same error twice, a command that times out.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ahe.llm.types import RoleConfig
from ahe.rollout.scheduler import RolloutConfig, run_rollouts
from debugger.agent import DebugLimits
from debugger.phase import run_debug_phase
from debugger.report import SECTIONS
from debugger.steps import read_text as step_text, step_names
from tests.conftest import SEED, write_files

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = "{word}" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""

WIDE = {**os.environ, "COLUMNS": "250"}  # rich wraps at 80 columns in a pipe


def sh(cmd: str, **kw) -> dict:
    return {"name": "run_shell_command", "arguments": {"command": cmd, **kw}}


def code_policy() -> dict:
    def on(word, turn, *calls, times=None):
        rule = {"match": {"first_user_contains": f"word {word} ", "turn": turn}, "tool_calls": list(calls)}
        if times:
            rule["times"] = times
        return rule

    return {"rules": [
        on("alpha", 1, sh("echo alpha > /app/answer.txt")),
        on("delta", 1, sh("cat /app/README")),
        on("delta", 2, sh("echo delta > /app/answer.txt"), times=1),  # the first trial to get here
        on("delta", 2, sh("echo delta-ish > /app/answer.txt")),  # every later one
        on("gamma", 1, sh("head -c 3000 /dev/urandom | base64 -w0")),
        on("gamma", 2, sh("seq 1 4000")),
        on("gamma", 3, sh("seq 1 1000")),
        on("gamma", 4, sh("seq 1 1000")),
        on("gamma", 5, sh("ls /nonexistent-dir")),
        on("gamma", 6, sh("ls /nonexistent-dir")),
        on("gamma", 7, sh("sleep 5", timeout=1)),
        on("gamma", 8, sh("echo wrong > /app/answer.txt")),
        {"reply": "done"},
    ]}


def mock_server(policy: dict):
    from ahe.testing import MockLLMServer, Policy

    server = MockLLMServer(Policy.from_dict(policy))
    return server, server.start()


def role(url: str) -> RoleConfig:
    return RoleConfig(model="mock", base_url=url, max_attempts=2, backoff_initial_sec=0.01, backoff_max_sec=0.02, timeout_sec=20)


@pytest.fixture(scope="module")
def iteration(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("debug-rollouts")
    for w in ("alpha", "delta", "gamma"):
        write_files(root / "tasks" / w, {
            "task.toml": f'[task]\nname = "{w}"\n[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 30\n',
            "instruction.md": f"Write the word {w} to /app/answer.txt.\n",
            "environment/README": "nothing here\n",
            "tests/test.sh": TEST_SH.format(word=w),
            "solution/solve.sh": f"echo {w} > /app/answer.txt\n",
        })
    server, url = mock_server(code_policy())
    try:
        out = root / "iterations" / "002"
        cfg = RolloutConfig(tasks_dir=root / "tasks", workspace=SEED, k=2, concurrency=1, isolation="bwrap", agent_role=role(url))
        res = asyncio.run(run_rollouts(cfg, out))
    finally:
        server.stop()
    assert res.n_trials == 6 and res.infra_errors == 0
    prev = root / "iterations" / "001"  # a previous iteration where alpha failed and gamma passed once
    prev.mkdir(parents=True)
    (prev / "results.json").write_text(json.dumps({"tasks": {"alpha": {"pass_rate": 0.0}, "delta": {"pass_rate": 0.5},
                                                             "gamma": {"pass_rate": 0.5}}}))
    return out


@pytest.fixture
def it(iteration, tmp_path) -> Path:
    """A private copy of the iteration (the phase writes into it)."""
    dst = tmp_path / "iterations" / "002"
    shutil.copytree(iteration, dst, symlinks=True)
    shutil.copytree(iteration.parent / "001", tmp_path / "iterations" / "001")
    return dst


def result(it: Path, task: str, trial: int) -> dict:
    return json.loads((it / "rollouts" / task / f"trial-{trial}" / "result.json").read_text())


async def test_corpus_files_cleaning_divergence_and_facts(it):
    s = await run_debug_phase(it, previous_dir=it.parent / "001", use_agent=False)
    corpus = it / "corpus"
    # one step per ATIF step (packed in steps.md), and one index line per step
    for task, trial in [("alpha", 1), ("delta", 2), ("gamma", 1)]:
        traj = json.loads((it / "rollouts" / task / f"trial-{trial}" / "trajectory.json").read_text())
        ids = [st["step_id"] for st in traj["steps"]]
        d = corpus / task / f"trial-{trial}"
        assert step_names(d) == [f"step-{i:03d}.md" for i in ids]
        index = (d / "index.md").read_text()
        assert [ln.split()[0] for ln in index.splitlines() if ln.startswith("step-")] == [f"step-{i:03d}" for i in ids]
    assert s.steps == sum(len(json.loads(p.read_text())["steps"]) for p in it.glob("rollouts/*/*/trajectory.json"))

    # the system prompt is kept once and pointed to
    shared = list((corpus / "_shared").glob("system-*.md"))
    assert len(shared) == 1
    assert f"corpus/_shared/{shared[0].name}" in step_text(corpus / "alpha" / "trial-1" / "step-001.md")

    g = corpus / "gamma" / "trial-1"
    raw = json.loads((it / "rollouts" / "gamma" / "trial-1" / "trajectory.json").read_text())
    blob = raw["steps"][2]["observation"]["results"][0]["content"].split("\n")[1]
    assert len(blob) == 4000 and blob not in step_text(g / "step-003.md")
    assert "[base64 blob dropped: 4,000 characters" in step_text(g / "step-003.md")
    long_step = step_text(g / "step-004.md")  # seq 1 4000: cut by the shell, then by the corpus
    assert "characters cut (lines" in long_step and "rollouts/gamma/trial-1/trajectory.json, step 4, result 1" in long_step
    assert "sandbox file: rollouts/gamma/trial-1/root/logs/exec/" in long_step and "\n4000\n" in long_step
    assert "1\n2\n3\n" in long_step
    repeat = step_text(g / "step-006.md")  # seq 1 1000 again: a reference, not the output
    assert "identical to corpus/gamma/trial-1/step-005.md (result 1)" in repeat and "\n500\n" not in repeat
    assert "[= gamma/trial-1/step-005.md]" in (g / "index.md").read_text()
    # the second trial's identical output points to the first trial's
    assert "identical to corpus/gamma/trial-1/step-005.md" in step_text(corpus / "gamma" / "trial-2" / "step-005.md")
    assert s.cleaning["blobs"] == 2 and s.cleaning["deduplicated"] == 4 and s.cleaning["truncated"] == 1
    assert s.raw_tokens > s.corpus_tokens > 0 and s.compression == pytest.approx(s.raw_bytes / s.corpus_bytes, rel=1e-3)

    # divergence: delta's trials part at turn 2, step 4
    note = (corpus / "delta" / "divergence.md").read_text()
    assert "First divergence: turn 2" in note
    assert "corpus/delta/trial-2/step-004.md" in note and "corpus/delta/trial-1/step-004.md" in note
    assert "echo delta-ish > /app/answer.txt" in note and "1 turn(s) before it are the same" in note
    assert not (corpus / "alpha" / "divergence.md").exists() and not (corpus / "gamma" / "divergence.md").exists()

    # facts match the rollouts exactly
    facts = json.loads((it / "analysis" / "facts.json").read_text())
    assert facts["totals"]["trials"] == 6 and facts["totals"]["passed"] == 3
    assert facts["totals"]["pass_at_1"] == pytest.approx(0.5)
    assert facts["totals"]["outcomes"] == {"pass": 1, "partial": 1, "fail": 1, "unknown": 0}
    for task in ("alpha", "delta", "gamma"):
        for n in (1, 2):
            r, f = result(it, task, n), facts["tasks"][task]["trials"][f"trial-{n}"]
            assert (f["passed"], f["reward"], f["turns"], f["stop_reason"]) == (r["passed"], r["reward"], r["turns"], r["stop_reason"])
            assert f["tokens"]["total"] == r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"]
            assert f["tool_calls"] == r["tool_calls"] and f["duration_sec"] == r["duration_sec"]
    d = facts["tasks"]["delta"]
    assert d["outcome"] == "partial" and d["pass_rate"] == 0.5 and d["flip"] == "unchanged"
    assert d["divergence"][0]["turn"] == 2 and d["divergence"][0]["fail_step"] == "corpus/delta/trial-2/step-004.md"
    assert facts["tasks"]["alpha"]["flip"] == "improved" and facts["tasks"]["gamma"]["flip"] == "regressed"
    assert facts["totals"]["improved"] == ["alpha"] and facts["totals"]["regressed"] == ["gamma"]
    gt = facts["tasks"]["gamma"]["trials"]["trial-1"]
    assert gt["tool_calls_by_tool"] == {"run_shell_command": 8} and gt["failed_tool_calls"] == 3
    assert gt["repeated_error_signatures"] == [{
        "signature": "run_shell_command: exit 2: ls: cannot access '/nonexistent-dir': No such file or directory",
        "count": 2, "steps": [7, 8]}]
    assert gt["timeouts"] == {"agent_timeout": False, "tool_timeouts": 1, "tool_timeout_steps": [9]}
    assert gt["last_commands"][-1] == {"step": 10, "call": "run_shell_command: echo wrong > /app/answer.txt"}
    assert gt["failure_kind"] == "wrong_answer" and gt["final_answer"] == "done"

    # facts-only reports and overview, every section present, no broken citation
    assert s.fallbacks == 3 and s.agent_reports == 0 and s.broken_citations == 0
    for task in ("alpha", "delta", "gamma"):
        md = (it / "analysis" / "tasks" / f"{task}.md").read_text()
        positions = [md.index(f"## {sec}\n") for sec in SECTIONS]
        assert positions == sorted(positions) and "FALLBACK from facts" in md
    assert "corpus/delta/trial-2/step-004.md" in (it / "analysis" / "tasks" / "delta.md").read_text()
    ov = json.loads((it / "analysis" / "overview.json").read_text())
    assert ov["source"] == "fallback" and ov["passing_tasks"] == ["alpha"]
    assert sorted(t for p in ov["patterns"] for t in p["tasks"]) == ["delta", "gamma"]
    summary = json.loads((it / "analysis" / "debug_summary.json").read_text())
    assert summary["analysis_order"] == ["delta", "gamma", "alpha"]


def debugger_policy() -> dict:
    def task(name: str, **m) -> dict:
        return {"tools_include": ["submit_report"], "first_user_contains": f"task `{name}`", **m}

    def submit(**report) -> dict:
        return {"name": "submit_report", "arguments": report}

    mech = "The agent wrote its answer without checking it against what the instruction asked for."
    return {"rules": [
        {"match": task("delta", turn=1), "tool_calls": [{"name": "read_file", "arguments": {"path": "corpus/delta/divergence.md"}}]},
        {"match": task("delta", turn=2, last_tool_result_contains="First divergence: turn 2"),
         "tool_calls": [{"name": "grep", "arguments": {"pattern": "answer.txt"}}]},
        {"match": task("delta", turn_min=3, last_tool_result_contains="delta-ish"), "tool_calls": [submit(
            outcome="One trial of two passed.", root_cause="On turn 2 the failing trial wrote a different word.",
            divergence="Turn 2: trial-2 writes delta-ish where trial-1 writes delta.",
            evidence=[{"ref": "corpus/delta/trial-2/step-004.md", "note": "writes the wrong word"},
                      {"ref": "corpus/delta/trial-1/step-004.md#L1-L3", "note": "the passing trial"}],
            general_mechanism=mech, component_class="system_prompt", confidence="high")]},
        {"match": task("gamma", turn=1), "tool_calls": [
            {"name": "read_file", "arguments": {"path": "/etc/passwd"}},
            {"name": "read_file", "arguments": {"path": "corpus/../rollouts/gamma/trial-1/result.json"}}]},
        {"match": task("gamma", turn_min=2), "tool_calls": [submit(
            outcome="Both trials failed.", root_cause="The agent lost its turns to repeated failing commands.",
            divergence="No passing trial.",
            evidence=[{"ref": "corpus/gamma/trial-1/step-007.md", "note": "ls fails"},
                      {"ref": "corpus/gamma/trial-1/step-099.md", "note": "a step that does not exist"}],
            general_mechanism="Repeating a failing command without changing it.", component_class="tool_implementation")]},
        {"match": task("alpha", turn=1), "tool_calls": [submit(
            outcome="Both passed.", root_cause="The instruction was followed directly.", divergence="No failing trial.",
            evidence=[{"ref": "corpus/alpha/trial-1/step-003.md", "note": "writes the word"}],
            general_mechanism="Simple file-writing instructions are followed.", component_class="system_prompt")]},
        {"match": {"tools_include": ["submit_overview"]}, "tool_calls": [{"name": "submit_overview", "arguments": {
            "summary": "Answers written without a check.",
            "patterns": [{"pattern": "unchecked answers", "description": mech, "tasks": ["delta", "nosuchtask"],
                          "component_class": "system_prompt",
                          "evidence": [{"ref": "corpus/delta/trial-2/step-004.md", "note": "wrong word"}]},
                         {"pattern": "repeated failing commands", "description": "Retrying without change.",
                          "tasks": ["gamma", "delta"], "component_class": "tool_implementation"}]}}]},
        {"reply": "mock: nothing to say"},
    ]}


async def test_debugger_agent_reports_citations_order_and_overview(it):
    server, url = mock_server(debugger_policy())
    try:
        s = await run_debug_phase(it, previous_dir=None, role=role(url), concurrency=1)
        requests = list(server.requests)
    finally:
        server.stop()
    assert s.agent_reports == 3 and s.fallbacks == 0, s.fallback_reasons
    # order: partial-pass first, then failing, then passing
    firsts = []
    for r in requests:
        user = next(m["content"] for m in r["messages"] if m["role"] == "user")
        name = user.split("`")[1] if user.startswith("Analyse the task `") else "_overview"
        if name not in firsts:
            firsts.append(name)
    assert firsts == ["delta", "gamma", "alpha", "_overview"]
    # the tools really read the corpus
    tool_msgs = [m for r in requests for m in r["messages"] if m["role"] == "tool"]
    assert any("First divergence: turn 2" in m["content"] for m in tool_msgs)
    assert any("corpus/delta/trial-2/step-004.md:" in m["content"] and "delta-ish" in m["content"] for m in tool_msgs)
    # confinement: the escape attempts were refused
    refused = [m["content"] for m in tool_msgs if "refused" in m["content"]]
    assert any("absolute paths are refused" in c for c in refused) and any("'..' is refused" in c for c in refused)

    d = json.loads((it / "analysis" / "tasks" / "delta.json").read_text())
    assert d["source"] == "agent" and d["component_class"] == "system_prompt" and d["broken_citations"] == 0
    assert [e["ok"] for e in d["evidence"]] == [True, True] and d["order"] == 1
    md = (it / "analysis" / "tasks" / "delta.md").read_text()
    assert [md.index(f"## {sec}\n") for sec in SECTIONS] == sorted(md.index(f"## {sec}\n") for sec in SECTIONS)
    assert "Source: debugger agent" in md and "BROKEN" not in md
    # gamma: the gate sent the broken citation back once; the second submission is kept and flagged
    g = json.loads((it / "analysis" / "tasks" / "gamma.json").read_text())
    assert g["broken_citations"] == 1 and g["turns"] == 3
    assert [e["ok"] for e in g["evidence"]] == [True, False]
    gmd = (it / "analysis" / "tasks" / "gamma.md").read_text()
    assert "**BROKEN**: corpus/gamma/trial-1/step-099.md does not exist in the corpus" in gmd and "1 citation(s) do not resolve" in gmd
    gate = [m["content"] for r in requests for m in r["messages"] if m["role"] == "tool" and "not accepted yet" in m["content"]]
    assert gate and "step-099.md" in gate[0]
    assert s.broken_citations == 1
    traj = json.loads((it / "analysis" / "traces" / "gamma" / "trajectory.json").read_text())
    assert traj["extra"]["stop_reason"] == "stop_tool"
    # overview from the model: unknown task dropped, each task in one pattern
    ov = json.loads((it / "analysis" / "overview.json").read_text())
    pats = {p["pattern"]: p for p in ov["patterns"]}
    assert ov["source"] == "model" and pats["unchecked answers"]["tasks"] == ["delta"]
    assert pats["repeated failing commands"]["tasks"] == ["gamma"] and pats["unchecked answers"]["count"] == 1
    assert pats["unchecked answers"]["evidence"][0]["ok"]
    assert pats["repeated failing commands"]["evidence"][0]["ref"] == "corpus/gamma/trial-1/step-007.md"  # from the report
    assert any("nosuchtask" in x for x in ov["dropped"])
    assert "unchecked answers" in (it / "analysis" / "overview.md").read_text()
    assert s.usage["calls"] == len(requests) and s.usage["total_tokens"] == s.debugger_tokens > 0


async def test_http_500_everywhere_falls_back_to_facts(it):
    server, url = mock_server({"rules": [], "default": {"fault": {"status": 500, "message": "boom"}}})
    try:
        s = await run_debug_phase(it, previous_dir=None, role=role(url), concurrency=2)
    finally:
        server.stop()
    assert s.agent_reports == 0 and s.fallbacks == 3 and not s.errors
    assert all("model endpoint failed" in r and "500" in r for r in s.fallback_reasons.values())
    md = (it / "analysis" / "tasks" / "delta.md").read_text()
    assert "FALLBACK from facts" in md and "HTTP 500" in md and "corpus/delta/trial-2/step-004.md" in md
    ov = json.loads((it / "analysis" / "overview.json").read_text())
    assert ov["source"] == "fallback" and ov["patterns"]
    assert (it / "analysis" / "facts.json").is_file() and s.warnings


async def test_limits_turns_and_task_count(it):
    server, url = mock_server(debugger_policy())
    try:
        s = await run_debug_phase(it, previous_dir=None, role=role(url), concurrency=2,
                                  limits=DebugLimits(max_turns=1, max_tasks=2, aggregate_with_model=False))
    finally:
        server.stop()
    # delta needs 3 turns: cut at 1; gamma: its first turn only reads; alpha is over the task limit
    assert s.fallback_reasons["delta"].startswith("the debugger submitted no report (session ended by max_turns")
    assert "over the limit of 2 task(s)" in s.fallback_reasons["alpha"]
    assert s.overview_source == "fallback"


def test_ahe_debug_cli_exits_0_with_a_warning_when_the_model_fails(it, tmp_path):
    policy = tmp_path / "fail.yaml"
    policy.write_text(yaml.safe_dump({"rules": [], "default": {"fault": {"status": 500, "retry_after": 0}}}))
    p = subprocess.run([sys.executable, "-m", "ahe.cli", "debug", str(it), "--mock-policy", str(policy)],
                       capture_output=True, text=True, timeout=120, env=WIDE)
    assert p.returncode == 0, p.stderr
    assert "MOCK" in p.stderr and "warning:" in p.stderr and "fell back to the facts" in p.stderr
    assert "tokens" in p.stdout and "raw →" in p.stdout and "raw/corpus ×" in p.stdout
    facts = json.loads((it / "analysis" / "facts.json").read_text())
    assert facts["previous_dir"] == str(it.parent / "001")  # found beside it
    assert (it / "analysis" / "overview.md").is_file()


async def test_bundled_mock_policy_gives_valid_reports_for_any_task(it):
    from ahe.testing import MockLLMServer, load_policy

    server = MockLLMServer(load_policy(Path(__file__).resolve().parent.parent / "debugger" / "mock_policy.yaml"))
    url = server.start()
    try:
        s = await run_debug_phase(it, previous_dir=None, role=role(url), concurrency=3)
    finally:
        server.stop()
    assert s.agent_reports == 3 and s.broken_citations == 0 and s.overview_source == "model", s.fallback_reasons
    a = json.loads((it / "analysis" / "tasks" / "alpha.json").read_text())
    assert [e["path"] for e in a["evidence"]] == ["corpus/alpha/trial-1/step-003.md", "corpus/alpha/trial-1/index.md"]
    ov = json.loads((it / "analysis" / "overview.json").read_text())
    assert ov["patterns"][0]["tasks"] == ["delta"] and ov["unclustered_tasks"] == ["gamma"]
