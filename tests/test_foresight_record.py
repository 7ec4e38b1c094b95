"""Foresight where the evolve agent decides: record_change answers with the replay, revise_change
updates the predictions, and the manifest keeps both the agent's predictions and `replay_at_risk`."""

from __future__ import annotations

import json

import pytest

from evolve_agent import EvolveLimits, run_evolve_phase
from evolve_agent.testing import call, make_experiment, scripted_rules
from tests.conftest import SEED
from tests.foresight_support import shell, write_trial
from tests.test_evolve_agent_phase import make_tasks, role

pytestmark = pytest.mark.bwrap

GUARD = ("from ahe.runtime import HookResult, Middleware\n\n\nclass NoDelete(Middleware):\n"
         "    def before_tool(self, ctx, call):\n"
         "        if 'rm -rf' in (call.arguments or {}).get('command', ''):\n"
         "            return HookResult(deny='deleting folders is not allowed')\n")
ENTRY = dict(component="middleware", summary="NoDelete middleware: refuse rm -rf",
             root_cause="the agent deletes folders it needs later", targeted_fix="deny rm -rf",
             predicted_fixes=["alpha-report"])


async def test_record_change_returns_the_replay_and_the_manifest_keeps_both(tmp_path, mock_llm):
    exp, repo = make_experiment(tmp_path / "run", SEED, results={"alpha-report": 0.0, "beta-merge": 1.0})
    it = exp / "iterations" / "001"
    for n in (1, 2):
        write_trial(it, "alpha-report", n, False, [[shell("cat data.csv")]])
        write_trial(it, "beta-merge", n, True, [[shell("ls")], [shell("rm -rf build && python3 -m unittest")]])
    steps = [
        call("write_file", path="middleware/no_delete.py", content=GUARD),
        call("edit_file", path="agent.yaml", old_string="middleware: []",
             new_string='middleware:\n  - {binding: "middleware.no_delete:NoDelete"}'),
        call("record_change", files=["middleware/no_delete.py", "agent.yaml"], **ENTRY),
        call("revise_change", id="chg-1", predicted_regressions=["beta-merge"]),
        call("revise_change", id="chg-5", predicted_regressions=[]),
        call("finish", message="done"),
    ]
    mock = mock_llm({"rules": scripted_rules(steps, when={"tools_include": ["record_change"]})})
    out = it / "evolve"
    manifest = await run_evolve_phase(repo=repo, experiment_dir=exp, iteration=1, out_dir=out, role=role(mock.url),
                                      tasks_dir=make_tasks(tmp_path / "tasks"), limits=EvolveLimits(max_turns=10))
    answers = [r["content"] for s in json.loads((out / "trajectory.json").read_text())["steps"]
               for r in (s.get("observation") or {}).get("results") or []]
    recorded = answers[2]
    assert recorded.startswith("recorded chg-1 as commit")
    assert "alters steps in 2 trial(s) of 1 task(s); 1 of them pass today" in recorded
    assert "beta-merge" in recorded and "corpus/beta-merge/trial-1/step-004.md" in recorded
    assert "call run_shell_command denied: deleting folders is not allowed" in recorded
    assert answers[3].startswith("revised chg-1") and "no change 'chg-5'" in answers[4]

    [c] = manifest.changes
    assert c.status == "accepted", c.gate_errors
    assert c.predicted_regressions == ["beta-merge"] and c.replay_at_risk == ["beta-merge"]
    assert c.replay.replayable and c.replay.kinds == ["middleware"] and c.replay.report == "evolve/replay/chg-1.json"
    assert c.replay.first_steps["beta-merge"].startswith("corpus/beta-merge/trial-1/step-004.md: call run_shell_command denied")
    full = json.loads((out / "replay" / "chg-1.json").read_text())
    assert full["at_risk"] == ["beta-merge"] and full["trials_replayed"] == 4
    saved = json.loads((out / "manifest.json").read_text())["changes"][0]
    assert saved["replay_at_risk"] == ["beta-merge"]
