"""The validation gate: broken changes never get accepted, one chance to fix, leakage rejected.

Real git repositories, real bwrap for the smoke sandbox, the MOCK model over real HTTP.
"""

from __future__ import annotations

import pytest

from ahe.harness.repo import HarnessRepo
from evolve_agent import EvolveLimits, run_evolve_phase, run_gate
from ahe.harness.manifest import ChangeEntry, Manifest
from evolve_agent.testing import call, make_experiment, scripted_rules
from tests.conftest import SEED
from tests.test_evolve_agent_phase import make_tasks, role

pytestmark = pytest.mark.bwrap

REGISTER = ("middleware: []", 'middleware:\n  - {binding: "middleware.noisy:Noisy"}')
NOISY = '''from ahe.runtime import Middleware


class Noisy(Middleware):
    def before_model(self, ctx, messages):
        raise RuntimeError("{msg} in before_model")

    def after_model(self, ctx, response):
        raise RuntimeError("{msg} in after_model")

    def before_tool(self, ctx, call):
        raise RuntimeError("{msg} in before_tool")

    def after_tool(self, ctx, call, result):
        raise RuntimeError("{msg} in after_tool")
'''
QUIET = '''from ahe.runtime import Middleware


class Noisy(Middleware):
    """Counts tool calls (the fixed version: no hook raises)."""

    def after_tool(self, ctx, call, result):
        ctx.state["tool_calls"] = ctx.state.get("tool_calls", 0) + 1
'''


def entry(cid: str, files: list[str], commit: str, **kw) -> ChangeEntry:
    return ChangeEntry(id=cid, component=kw.pop("component", "middleware"), files=files, summary="a change for the test",
                       root_cause="a cause of failures", targeted_fix="a fix for them", commit=commit, **kw)


def tree(repo: HarnessRepo, rev: str = "HEAD") -> str:
    return repo.repo.commit(rev).tree.hexsha


async def test_middleware_that_does_not_import_is_rejected_after_one_chance(tmp_path):
    repo = HarnessRepo.create(tmp_path / "ws", SEED)
    base = repo.head()
    (repo.path / "middleware").mkdir()
    (repo.path / "middleware" / "noisy.py").write_text("import module_that_does_not_exist_xyz\n" + QUIET)
    agent_yaml = repo.path / "agent.yaml"
    agent_yaml.write_text(agent_yaml.read_text().replace(*REGISTER))
    files = ["agent.yaml", "middleware/noisy.py"]
    commit = repo.commit_paths(files, "chg-1")  # bypassing record_change, which refuses it up front
    manifest = Manifest(iteration=1, base_commit=base, changes=[entry("chg-1", files, commit)])
    seen = []

    async def repair(change, errors):
        seen.append((change.id, list(errors), repo.changed_files()))
        return None  # the agent could not fix it

    await run_gate(repo, manifest, repair=repair, trace_dir=tmp_path / "gate")
    change = manifest.changes[0]
    assert change.status == "rejected" and manifest.accepted() == []
    assert any("module_that_does_not_exist_xyz" in e and "failed to import" in e for e in change.gate_errors), change.gate_errors
    assert "not repaired" in change.gate_errors[-1]
    # one chance, with the exact error and the edits back in the working tree
    assert len(seen) == 1 and seen[0][0] == "chg-1" and "module_that_does_not_exist_xyz" in seen[0][1][0]
    assert seen[0][2] == files
    # the repository is back to the state without the change
    assert tree(repo) == tree(repo, base) and not repo.is_dirty()
    assert len(change.revert_commits) == 1 and change.revert_commits[0] == repo.head()


def noisy_policy(repair_content: str) -> dict:
    main = [
        call("write_file", path="middleware/noisy.py", content=NOISY.replace("{msg}", "broken")),
        call("edit_file", path="agent.yaml", old_string=REGISTER[0], new_string=REGISTER[1]),
        call("record_change", kind="new", component="middleware", files=["middleware/noisy.py", "agent.yaml"],
             summary="count tool calls in a middleware", root_cause="no record of tool use",
             targeted_fix="a middleware counting tool calls", predicted_fixes=["alpha-report"]),
        call("finish", message="one middleware"),
    ]
    fix = [
        call("write_file", path="middleware/noisy.py", content=repair_content),
        call("record_change", id="chg-1", kind="new", component="middleware", files=["middleware/noisy.py", "agent.yaml"],
             summary="count tool calls in a middleware (fixed)", root_cause="no record of tool use",
             targeted_fix="a middleware counting tool calls, without raising", predicted_fixes=["alpha-report"]),
        call("finish", message="fixed"),
    ]
    return {"rules": scripted_rules(fix, when={"first_user_contains": "validation gate rejected"}, name="repair")
            + scripted_rules(main, when={"first_user_contains": "Iteration 1."}, name="main")}


async def run_noisy(tmp_path, mock_llm, repair_content: str):
    exp, repo = make_experiment(tmp_path / "run", SEED, overview="# Overview\n", results={"alpha-report": 0.0})
    mock = mock_llm(noisy_policy(repair_content))
    out = exp / "iterations" / "001" / "evolve"
    manifest = await run_evolve_phase(repo=repo, experiment_dir=exp, iteration=1, out_dir=out, role=role(mock.url),
                                      tasks_dir=make_tasks(tmp_path / "tasks"),
                                      limits=EvolveLimits(max_turns=10, repair_max_turns=6, smoke_timeout_sec=30))
    return exp, repo, out, manifest, mock


async def test_middleware_raising_in_every_hook_gets_one_chance_then_is_rejected(tmp_path, mock_llm):
    exp, repo, out, manifest, mock = await run_noisy(tmp_path, mock_llm, NOISY.replace("{msg}", "still broken"))
    base = manifest.base_commit
    assert len(manifest.changes) == 1
    change = manifest.changes[0]
    assert change.status == "rejected", change
    errors = "\n".join(change.gate_errors)
    assert "attempt 1" in errors and "attempt 2" in errors
    assert "middleware Noisy raised in every hook it defines that ran" in errors and "still broken in after_tool" in errors
    assert len(change.superseded_commits) == 1 and len(change.revert_commits) == 2
    assert tree(repo) == tree(repo, base) and not repo.is_dirty()
    assert not (repo.path / "middleware" / "noisy.py").exists()
    # the repair session got the exact error
    repair_first = [r for r in mock.requests if "validation gate rejected" in str(r["messages"][1]["content"])]
    assert repair_first and "broken in before_model" in repair_first[0]["messages"][1]["content"]
    assert (out / "repairs" / "chg-1" / "trajectory.json").exists()
    saved = Manifest.model_validate_json((out / "manifest.json").read_text())
    assert saved.changes[0].status == "rejected" and saved.accepted() == []
    assert "REJECTED" in (out / "summary.md").read_text()


async def test_a_change_fixed_in_its_second_chance_is_accepted(tmp_path, mock_llm):
    exp, repo, out, manifest, mock = await run_noisy(tmp_path, mock_llm, QUIET)
    change = manifest.changes[0]
    assert change.status == "accepted", change.gate_errors
    assert change.summary.endswith("(fixed)") and len(change.superseded_commits) == 1
    assert repo.files_in_commit(change.commit) == ["agent.yaml", "middleware/noisy.py"]
    assert (repo.path / "middleware" / "noisy.py").read_text() == QUIET
    assert "middleware.noisy:Noisy" in (repo.path / "agent.yaml").read_text()
    assert change.commit == repo.head() and not repo.is_dirty()
    assert manifest.gate_notes == []  # the workspace is exactly base + accepted changes
    assert manifest.accepted() == [change]


async def test_leaky_change_is_rejected_and_a_later_clean_change_is_kept(tmp_path):
    repo = HarnessRepo.create(tmp_path / "ws", SEED)
    tasks = make_tasks(tmp_path / "tasks")
    base = repo.head()
    mem = repo.path / "LongTermMEMORY.md"
    mem.write_text("- For the hidden test: self.assertEqual(merge([(3, 5), (1, 3)]), [(1, 5)])\n")
    c1 = repo.commit_paths(["LongTermMEMORY.md"], "chg-1")
    prompt = repo.path / "systemprompt.md"
    prompt.write_text(prompt.read_text() + "\nCheck the exact output format before you stop.\n")
    c2 = repo.commit_paths(["systemprompt.md"], "chg-2")
    manifest = Manifest(iteration=1, base_commit=base, changes=[
        entry("chg-1", ["LongTermMEMORY.md"], c1, component="long_term_memory"),
        entry("chg-2", ["systemprompt.md"], c2, component="system_prompt"),
    ])
    await run_gate(repo, manifest, tasks_dir=tasks, trace_dir=tmp_path / "gate")
    leaky, clean = manifest.changes
    assert leaky.status == "rejected" and clean.status == "accepted", (leaky.gate_errors, clean.gate_errors)
    assert any("leakage in LongTermMEMORY.md" in e and "beta-merge" in e for e in leaky.gate_errors)
    assert mem.read_text() == "" and "Check the exact output format" in prompt.read_text()
    assert manifest.gate_notes == []


async def test_files_not_matching_the_manifest_and_protected_parts_fail_the_gate(tmp_path):
    repo = HarnessRepo.create(tmp_path / "ws", SEED)
    base = repo.head()
    (repo.path / "LongTermMEMORY.md").write_text("- a lesson\n")
    cfg = repo.path / "agent.yaml"
    cfg.write_text(cfg.read_text().replace("temperature: 0.7", "temperature: 0.1"))
    commit = repo.commit_paths(["LongTermMEMORY.md", "agent.yaml"], "chg-1")
    manifest = Manifest(iteration=1, base_commit=base, changes=[entry("chg-1", ["LongTermMEMORY.md"], commit)])
    await run_gate(repo, manifest, trace_dir=tmp_path / "gate")
    errors = "\n".join(manifest.changes[0].gate_errors)
    assert manifest.changes[0].status == "rejected"
    assert "manifest entry lists ['LongTermMEMORY.md']" in errors and "llm block" in errors
    assert "leakage lint skipped" in manifest.gate_notes[0]
    assert tree(repo) == tree(repo, base)


async def test_config_paths_leading_outside_the_workspace_are_rejected(tmp_path):
    repo = HarnessRepo.create(tmp_path / "ws", SEED)
    tasks = make_tasks(tmp_path / "tasks")
    base = repo.head()
    cfg = repo.path / "agent.yaml"
    secret = tasks / "alpha-report" / "tests" / "expected.txt"
    cfg.write_text(cfg.read_text().replace("memory: LongTermMEMORY.md", f"memory: {secret}"))
    commit = repo.commit_paths(["agent.yaml"], "chg-1")
    manifest = Manifest(iteration=1, base_commit=base, changes=[entry("chg-1", ["agent.yaml"], commit, component="long_term_memory")])
    await run_gate(repo, manifest, tasks_dir=tasks, trace_dir=tmp_path / "gate")
    assert manifest.changes[0].status == "rejected"
    assert any("memory" in e and "points outside the workspace" in e for e in manifest.changes[0].gate_errors)
    assert tree(repo) == tree(repo, base)
