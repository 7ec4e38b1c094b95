"""20% of all model calls faulted, across the three roles, during a 3-iteration `ahe evolve`.

Each role's MOCK server (real HTTP) replaces a seeded fifth of its answers by a fault, the kinds
taken in turn: HTTP 429, HTTP 500, a timeout, malformed tool-call JSON, an empty reply, prose
instead of a tool call. The run must complete, and every injected fault must show up in the run
folder classified: retried (llm_retry events), returned to the model as a tool error, or ended
as the agent's own failure (a session with no tool call) — never a crash, never silent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ahe.demo import write_demo
from ahe.testing import MockLLMServer, Policy
from tests.adversarial.record import Tally

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
RATE = 0.2
ROLES = ("agent", "debugger", "evolve")
KINDS = ("http_429", "http_500", "timeout", "malformed_tool_args", "empty_reply", "prose")


def _events(run: Path) -> list[dict]:
    out = []
    for f in run.rglob("events.jsonl"):
        for line in f.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def _tool_errors(run: Path) -> int:
    """Tool results that told the model its arguments were not valid JSON."""
    n = 0
    for f in run.rglob("trajectory.json"):
        text = f.read_text()
        n += text.count("arguments are not valid JSON") + text.count("not valid JSON")
    return n


def test_a_fifth_of_model_calls_faulted_in_every_role(tmp_path):
    cfg_path = write_demo(tmp_path / "demo")
    cfg = yaml.safe_load(cfg_path.read_text())
    servers = {}
    try:
        for i, role in enumerate(ROLES):
            pol = yaml.safe_load((cfg_path.parent / cfg["mock_policies"][role]).read_text())
            kinds = list(KINDS[2 * i:] + KINDS[:2 * i])  # each role starts elsewhere, so each sees the rarer kinds
            pol["chaos"] = {"rate": RATE, "seed": 17 + i, "hang_sec": 2.5, "kinds": kinds}
            servers[role] = MockLLMServer(Policy.from_dict(pol), log_requests=False)
            url = servers[role].start()
            cfg["models"][role] = {"model": f"mock-{role}", "base_url": url, "timeout_sec": 1.5, "max_attempts": 8,
                                   "backoff_initial_sec": 0.01, "backoff_max_sec": 0.05}
        del cfg["mock_policies"]
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        run = tmp_path / "run"
        proc = subprocess.run([sys.executable, "-m", "ahe.cli", "evolve", str(cfg_path), "--run-dir", str(run), "-q"],
                              capture_output=True, text=True, timeout=900, env={**os.environ, "OPENAI_API_KEY": "unused"})
        counts = {role: s.chaos_counts for role, s in servers.items()}
    finally:
        for s in servers.values():
            s.stop()

    tally = Tally("faults")
    scores = json.loads((run / "scores.json").read_text()) if (run / "scores.json").exists() else {}
    completed = proc.returncode == 0 and len(scores.get("iterations", [])) == 4 and "Traceback" not in proc.stderr
    injected = {k: sum(c.get(k, 0) for c in counts.values()) for k in KINDS}
    per_role = {role: sum(v for k, v in c.items() if k != "answers") for role, c in counts.items()}
    answers = sum(c["answers"] for c in counts.values())
    events = _events(run)
    retries = [e for e in events if e.get("type") == "llm_retry" or e.get("kind") == "llm_retry" or e.get("event") == "llm_retry"]
    retry_text = json.dumps(retries)
    classified = {
        "http_429": retry_text.count("HTTP 429"),
        "http_500": retry_text.count("HTTP 500"),
        "timeout": retry_text.count("no answer within"),
        "malformed_tool_args": _tool_errors(run),
    }
    (tmp_path / "fault-counts.json").write_text(json.dumps({"counts": counts, "classified": classified}, indent=1))
    note = (f"{answers} model calls, {sum(injected.values())} faulted ({sum(injected.values()) / max(answers, 1):.0%}; "
            + ", ".join(f"{r} {n}" for r, n in per_role.items()) + ")")
    tally("3-iteration evolve completes with 20% of calls faulted", completed, "retries, fallbacks, loop",
          good="survived", note=note if completed else proc.stderr[-500:])
    for kind in ("http_429", "http_500", "timeout"):
        tally(f"fault: {kind.replace('_', ' ')}", injected[kind] > 0 and classified[kind] >= injected[kind],
              "ahe/llm client: retried with backoff (llm_retry events)", attempts=injected[kind], good="survived",
              note=f"{classified[kind]} classified")
    tally("fault: malformed tool-call JSON", injected["malformed_tool_args"] > 0
          and classified["malformed_tool_args"] >= 1, "runtime: an error result to the model",
          attempts=injected["malformed_tool_args"], good="survived", note=f"{classified['malformed_tool_args']} seen")
    for kind in ("empty_reply", "prose"):
        tally(f"fault: {kind.replace('_', ' ')} (no tool call)", injected[kind] > 0 and completed,
              "runtime: the session ends as the agent's failure; debugger/evolve fall back", attempts=injected[kind],
              good="survived")
    tally.check()
    assert 0.1 <= sum(injected.values()) / answers <= 0.3, counts
    assert all(n > 0 for n in per_role.values()), counts  # every role was faulted


async def test_what_a_real_small_model_does(tmp_path, mock_llm):
    """Behaviours seen from Gemma 3 270M (docs/reliability.md): a 400 on the tool schemas is classified
    and not retried beyond --retry-infra; echoing the instruction without a tool call is the agent's failure."""
    from ahe.llm.types import RoleConfig
    from ahe.rollout.scheduler import RolloutConfig, run_rollouts
    from tests.conftest import SEED, write_files

    tasks = write_files(tmp_path / "tasks", {"t/task.toml": '[task]\nname = "t"\n', "t/instruction.md": "Write ok to /app/out.txt.\n",
                                             "t/tests/test.sh": "#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n"})
    tally = Tally("faults")
    bad_schema = mock_llm({"rules": [{"match": {"tools_include": ["run_shell_command"]},
                                      "fault": {"status": 400, "message": "tools: unsupported JSON schema keyword"}}]})
    cfg = RolloutConfig(tasks_dir=tasks, workspace=SEED, k=1, retry_infra=1, isolation="bwrap",
                        agent_role=RoleConfig(model="mock", base_url=bad_schema.url, max_attempts=5, backoff_initial_sec=0.01))
    res = await run_rollouts(cfg, tmp_path / "400")
    await run_rollouts(cfg, tmp_path / "400")  # --retry-infra 1: one more attempt, then it counts
    await run_rollouts(cfg, tmp_path / "400")
    result = json.loads((tmp_path / "400/rollouts/t/trial-1/result.json").read_text())
    tally("HTTP 400 on the tool schemas", result["error_class"] == "infra" and "not retried" in (result["error"] or "")
          and len(bad_schema.requests) == 2 and res.infra_errors == 1, "ahe/llm client: llm_rejected, never retried; "
          "rollouts: --retry-infra bounds the trial", attempts=len(bad_schema.requests), good="survived",
          note=f"{len(bad_schema.requests)} requests for 3 runs with --retry-infra 1")
    echo = mock_llm({"rules": [{"reply": "{{ instruction }}"}]})
    cfg = RolloutConfig(tasks_dir=tasks, workspace=SEED, k=1, isolation="bwrap",
                        agent_role=RoleConfig(model="mock", base_url=echo.url))
    res = await run_rollouts(cfg, tmp_path / "echo")
    result = json.loads((tmp_path / "echo/rollouts/t/trial-1/result.json").read_text())
    tally("turn-1 reply with no tool call (the instruction echoed)", result["stop_reason"] == "no_tool_call"
          and result["error_class"] is None and res.infra_errors == 0 and result["turns"] == 1,
          "runtime: the session ends; the trial is the agent's failure, not infra", good="survived")
    tally.check()
