"""Traces made elsewhere (ATIF, NexAU tracer dumps, OpenAI message lists) → the same corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ahe.errors import AheError
from debugger.importers import import_traces, openai_to_atif
from debugger.nexau import nexau_to_atif
from debugger.phase import run_debug_phase
from debugger.steps import read_text as step_text, step_names

FIX = Path(__file__).parent / "fixtures" / "traces"


async def build(fmt: str, out: Path) -> tuple[dict, dict]:
    manifest = import_traces(FIX / fmt, fmt, out)
    s = await run_debug_phase(out, previous_dir=None, use_agent=False)
    assert not s.errors, s.errors
    return manifest, json.loads((out / "analysis" / "facts.json").read_text())

WIDE = {**os.environ, "COLUMNS": "250"}  # rich wraps at 80 columns in a pipe


def steps_of(out: Path, task: str, trial: str) -> list[str]:
    return step_names(out / "corpus" / task / trial)


def assert_same_structure(out: Path, task: str, trial: str, n_steps: int) -> None:
    d = out / "corpus" / task / trial
    assert steps_of(out, task, trial) == [f"step-{i:03d}.md" for i in range(1, n_steps + 1)]
    index = (d / "index.md").read_text()
    assert index.startswith(f"# Index — {task}/{trial}\n")
    assert len([ln for ln in index.splitlines() if ln.startswith("step-")]) == n_steps
    assert (out / "analysis" / "tasks" / f"{task}.md").is_file()


async def test_atif_harbor_layout(tmp_path):
    manifest, facts = await build("atif", tmp_path)
    assert sorted((e["task"], e["trial"], e["reward"]) for e in manifest["traces"]) == [
        ("count-lines", "trial-1", None), ("fix-config", "r1", 1.0), ("fix-config", "r2", 0.0)]
    assert_same_structure(tmp_path, "fix-config", "r1", 5)
    assert_same_structure(tmp_path, "fix-config", "r2", 6)
    assert_same_structure(tmp_path, "count-lines", "trial-1", 3)
    fc = facts["tasks"]["fix-config"]
    assert fc["outcome"] == "partial" and fc["trials"]["r1"]["passed"] is True and fc["trials"]["r2"]["passed"] is False
    assert facts["tasks"]["count-lines"]["outcome"] == "unknown"
    r2 = fc["trials"]["r2"]
    assert r2["tool_calls_by_tool"] == {"bash_command": 4}
    assert r2["repeated_error_signatures"][0]["signature"] == "bash_command: ValueError: port out of range: N"
    assert r2["repeated_error_signatures"][0]["count"] == 3 and r2["tokens"]["total"] == 11530
    note = (tmp_path / "corpus" / "fix-config" / "divergence.md").read_text()
    assert "turn 2" in note and "corpus/fix-config/r2/step-004.md" in note and "port: 8080" in note
    step = step_text(tmp_path / "corpus" / "fix-config" / "r1" / "step-004.md")
    assert "~~~bash\nsed -i 's/port: 80800/port: 8080/' /app/config.yaml" in step and "OK" in step


async def test_nexau_dump_with_sub_agents_anthropic_and_xml_tools(tmp_path):
    manifest, facts = await build("nexau", tmp_path)
    assert sorted((e["task"], e["trial"], e["reward"]) for e in manifest["traces"]) == [
        ("build-api", "trial-1", 1.0), ("build-api", "trial-2", 0.0), ("parse-logs", "run-7", 1.0)]
    assert_same_structure(tmp_path, "build-api", "trial-1", 6)
    assert_same_structure(tmp_path, "build-api", "trial-2", 5)
    assert_same_structure(tmp_path, "parse-logs", "run-7", 5)
    # the sub-agent span became its own session in the corpus, referenced from the step that ran it
    sub = tmp_path / "corpus" / "build-api" / "trial-1" / "sub_agents" / "01-researcher"
    assert step_names(sub) == [f"step-{i:03d}.md" for i in range(1, 5)]
    assert "pytest.ini" in step_text(sub / "step-003.md")
    assert "sub-agent trace: corpus/build-api/trial-1/sub_agents/01-researcher/index.md" in step_text(
        tmp_path / "corpus" / "build-api" / "trial-1" / "step-003.md")
    t2 = facts["tasks"]["build-api"]["trials"]["trial-2"]
    assert t2["timeouts"]["tool_timeouts"] == 1 and t2["failed_tool_calls"] == 1 and t2["sub_agent_runs"] == 1
    assert t2["tokens"]["total"] == 1800 + 60 + 2400 + 50 + 2600 + 30
    assert "TIMEOUT" in (tmp_path / "corpus" / "build-api" / "trial-2" / "index.md").read_text()
    div = facts["tasks"]["build-api"]["divergence"][0]
    assert (div["turn"], div["kind"], div["fail_step"]) == (2, "action", "corpus/build-api/trial-2/step-004.md")
    # Anthropic content blocks and a tool called in text (XML mode): the call is added to the step
    run = (tmp_path / "corpus" / "parse-logs" / "run-7")
    assert "grep -c ERROR /logs/app.log" in step_text(run / "step-003.md")
    assert "## Reasoning" in step_text(run / "step-003.md")
    s4 = step_text(run / "step-004.md")
    assert "## Tool call 1: read_file (tool_1)" in s4 and "17" in s4
    assert facts["tasks"]["parse-logs"]["trials"]["run-7"]["tool_calls_by_tool"] == {"read_file": 1, "run_shell_command": 1}


async def test_openai_messages_json_jsonl_and_legacy_function_calls(tmp_path):
    manifest, facts = await build("openai", tmp_path)
    assert sorted((e["task"], e["trial"], e["reward"]) for e in manifest["traces"]) == [
        ("legacy-function", "trial-1", None), ("sort-list", "trial-1", 1.0), ("sort-list", "trial-2", 0.0)]
    assert_same_structure(tmp_path, "sort-list", "trial-1", 7 - 2)  # tool messages fold into their agent step
    assert_same_structure(tmp_path, "sort-list", "trial-2", 5)
    s3 = step_text(tmp_path / "corpus" / "sort-list" / "trial-1" / "step-003.md")
    assert "~~~bash\nhead -5 /app/nums.txt\n~~~" in s3 and "10\n9\n100" in s3
    note = (tmp_path / "corpus" / "sort-list" / "divergence.md").read_text()
    assert "corpus/sort-list/trial-2/step-004.md" in note and "sort -n" in note
    legacy = step_text(tmp_path / "corpus" / "legacy-function" / "trial-1" / "step-002.md")
    assert "get_weather" in legacy and "temp_c" in legacy
    assert facts["tasks"]["sort-list"]["pass_rate"] == 0.5


def test_converters_directly():
    traj = openai_to_atif([{"role": "user", "content": "hi"},
                           {"role": "assistant", "content": None, "tool_calls": [
                               {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]},
                           {"role": "tool", "tool_call_id": "a", "content": "out"}])
    agent = traj["steps"][1]
    assert agent["tool_calls"][0]["arguments"] == {"_raw": "{not json"}
    assert agent["observation"]["results"][0] == {"source_call_id": "a", "content": "out", "extra": {"tool": "f", "is_error": False}}
    root = json.loads((FIX / "nexau" / "build-api.json").read_text())[0]
    traj, subs = nexau_to_atif(root)
    assert [s["source"] for s in traj["steps"]] == ["system", "user", "agent", "agent", "agent", "agent"]
    assert [name for name, _, _ in subs] == ["researcher"] and traj["extra"]["final_answer"].startswith("Added GET /health")


def test_bad_input_is_one_clear_error(tmp_path):
    with pytest.raises(AheError, match="--format must be one of atif, nexau, openai"):
        import_traces(FIX / "atif", "langfuse", tmp_path / "x")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "a.json").write_text("{\"not\": \"a trajectory\"}")
    with pytest.raises(AheError, match="could be read as atif"):
        import_traces(tmp_path / "junk", "atif", tmp_path / "y")


def test_ahe_debug_traces_cli(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "ahe.cli", "debug", "--traces", str(FIX / "nexau"), "--format", "nexau",
                        "--out", str(out), "--no-agent"], capture_output=True, text=True, timeout=60, env=WIDE)
    assert p.returncode == 0, p.stderr
    assert "imported 3 nexau trace(s)" in p.stderr and "raw/corpus ×" in p.stdout
    assert (out / "corpus" / "build-api" / "divergence.md").is_file() and (out / "analysis" / "overview.md").is_file()
    bad = subprocess.run([sys.executable, "-m", "ahe.cli", "debug", str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=60, env=WIDE)
    assert bad.returncode == 2 and "no such folder" in bad.stderr and "Traceback" not in bad.stderr
