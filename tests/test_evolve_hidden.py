"""The evolve agent cannot read the answers: the run folder's sealed tasks (every verifier and
reference solution), the held-out split and the experiment file stay hidden from its file tools
and its shell, while the evidence under /experiment/iterations stays readable.

The agent is the scripted MOCK model over real HTTP; its shell runs in real bwrap.
"""

from __future__ import annotations

import json
import uuid

import pytest

from evolve_agent import EvolveLimits, run_evolve_phase
from evolve_agent.testing import call, make_experiment, scripted_rules
from tests.conftest import SEED
from tests.test_evolve_agent_phase import role

pytestmark = pytest.mark.bwrap


def _plant(exp, token: str) -> None:
    task = exp / "sealed" / "tasks" / "secret-task"
    (task / "solution").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution" / "solve.sh").write_text(f"echo {token}-solution > /app/out.txt\n")
    (task / "tests" / "test_outputs.py").write_text(f"assert open('/app/out.txt').read() == '{token}-test'\n")
    (exp / "holdout").mkdir()
    (exp / "holdout" / "split.json").write_text(json.dumps({"held_out": [f"{token}-held-out"]}))
    (exp / "experiment.yaml").write_text(f"holdout: {{tasks: [{token}-yaml]}}\n")


async def test_sealed_tasks_holdout_and_experiment_file_are_hidden_from_every_tool(tmp_path, mock_llm):
    token = "TOKEN" + uuid.uuid4().hex[:10]
    exp, repo = make_experiment(tmp_path / "run", SEED, overview="# Overview\nevidence-is-visible\n")
    _plant(exp, token)
    steps = [
        call("read_file", path="/experiment/sealed/tasks/secret-task/solution/solve.sh"),
        call("read_file", path="/experiment/holdout/split.json"),
        call("read_file", path="/experiment/experiment.yaml"),
        call("read_file", path="/experiment/iterations/../sealed/tasks/secret-task/tests/test_outputs.py"),
        call("list_files", path="/experiment", depth=6),
        call("list_files", path="/experiment/sealed"),
        call("grep", pattern="TOKEN[0-9a-f]{10}", path="/experiment"),  # never the token itself: its own call is evidence
        call("grep", pattern="evidence-is-visible", path="/experiment"),
        call("shell", command="cat /experiment/sealed/tasks/secret-task/solution/solve.sh; ls -R /experiment/sealed; "
                              "cat /experiment/holdout/split.json /experiment/experiment.yaml; grep -rE 'TOKEN[0-9a-f]{10}' /experiment; "
                              "cat /experiment/iterations/001/analysis/overview.md"),
        call("finish", message="done"),
    ]
    mock = mock_llm({"rules": scripted_rules(steps, when={"tools_include": ["record_change"]})})
    out = exp / "iterations" / "001" / "evolve"
    manifest = await run_evolve_phase(repo=repo, experiment_dir=exp, iteration=1, out_dir=out, role=role(mock.url),
                                      tasks_dir=None, limits=EvolveLimits(max_turns=20, wall_clock_sec=120))
    assert manifest.shell_isolated is True

    # what the model was sent back: every tool result of the session, in the mock's own log
    seen = "\n".join(json.dumps(r["messages"][-1]) for r in mock.requests[1:])
    assert token not in seen, [line for line in seen.splitlines() if token in line][:3]
    assert "evidence-is-visible" in seen  # the evidence is still there, to grep and to cat
    assert seen.count("hidden from the evolve agent") >= 4  # read_file ×3 (one through ..), list_files of sealed
    tools = {r.tool for r in manifest.refusals if "hidden" in r.reason}
    assert {"read_file", "list_files"} <= tools
    # nothing of the session's record holds the token either
    for p in out.rglob("*"):
        if p.is_file():
            assert token not in p.read_text(errors="replace"), p
