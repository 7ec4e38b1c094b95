"""The gate never imports the harness's code in AHE's own process (issue #21): loading, the
smoke plan and the signature checks all come from a confined worker's description of it.

The middleware below marks every interpreter that imports it; after a full gate run (load
check, smoke session, leakage lint) in this test's process, this process must be unmarked
and must not hold the module — while the smoke session did exercise the middleware.
"""

from __future__ import annotations

import builtins
import sys

import pytest

from ahe.harness.manifest import ChangeEntry, Manifest
from ahe.harness.repo import HarnessRepo
from evolve_agent import run_gate
from evolve_agent.workspace_load import load_problem
from tests.conftest import SEED

pytestmark = pytest.mark.bwrap

MARKING = '''import builtins

builtins._ahe_harness_code_imported_here = True  # top-level code: runs wherever this is imported

from ahe.runtime import Middleware


class Marker(Middleware):
    def after_tool(self, ctx, call, result):
        ctx.state["seen"] = ctx.state.get("seen", 0) + 1
'''
BAD_SIGNATURE_TOOL = '''def count(path):
    return "0"
'''


def test_gate_and_record_checks_load_the_harness_only_in_a_worker(tmp_path):
    repo = HarnessRepo.create(tmp_path / "ws", SEED)
    base = repo.head()
    (repo.path / "middleware").mkdir()
    (repo.path / "middleware" / "marker.py").write_text(MARKING)
    agent_yaml = repo.path / "agent.yaml"
    agent_yaml.write_text(agent_yaml.read_text().replace("middleware: []", 'middleware:\n  - {binding: "middleware.marker:Marker"}'))
    assert load_problem(repo.path) is None  # record_change's check
    files = ["agent.yaml", "middleware/marker.py"]
    commit = repo.commit_paths(files, "chg-1")
    manifest = Manifest(iteration=1, base_commit=base, changes=[ChangeEntry(
        id="chg-1", component="middleware", files=files, summary="a marker middleware", root_cause="a cause",
        targeted_fix="a fix", commit=commit)])
    gate_dir = tmp_path / "gate"
    run = __import__("asyncio").run
    run(run_gate(repo, manifest, trace_dir=gate_dir))
    assert manifest.changes[0].status == "accepted", manifest.changes[0].gate_errors
    assert not hasattr(builtins, "_ahe_harness_code_imported_here"), "harness code ran in AHE's own process"
    assert not any(name == "middleware.marker" or name.startswith("middleware.") for name in sys.modules)
    # the smoke session did run the middleware (in its worker): its hook saw the tool calls
    events = (gate_dir / "chg-1" / "events.jsonl").read_text()
    assert "tool_call" in events


def test_a_signature_problem_is_found_from_the_workers_description(tmp_path):
    from evolve_agent.smoke import smoke_check

    repo = HarnessRepo.create(tmp_path / "ws", SEED)
    desc = repo.path / "tool_descriptions" / "count.tool.yaml"
    desc.write_text("name: count\ndescription: count lines\ninput_schema:\n  type: object\n  properties:\n"
                    "    path: {type: string}\n    limit: {type: integer}\n  required: [path]\n")
    (repo.path / "tools" / "count.py").write_text(BAD_SIGNATURE_TOOL)
    agent_yaml = repo.path / "agent.yaml"
    text = agent_yaml.read_text()
    agent_yaml.write_text(text.replace("tools:\n", 'tools:\n  - {name: count, description: tool_descriptions/count.tool.yaml, binding: "tools.count:count"}\n', 1))
    report = __import__("asyncio").run(smoke_check(repo.path, timeout_sec=30))
    assert any("its schema offers argument 'limit' but the function does not accept it" in e for e in report.errors), report.errors
    assert "tools.count" not in sys.modules
