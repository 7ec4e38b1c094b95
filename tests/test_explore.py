"""The explore agent: a fourth workspace on the same runtime, reading local sources and recording
skills through the evolve agent's record/validation path (real HTTP to the MOCK model, real git)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ahe.llm.types import RoleConfig
from evolve_agent.testing import call, scripted_rules
from explore_agent import run_explore_phase, snapshot_sources
from tests.conftest import SEED, write_files

SKILL = "---\nname: verify-before-finish\ndescription: Check the result against the task's stated format before finishing.\n---\n" \
        "1. Re-read the instruction's output spec.\n2. Print the file you wrote and compare it.\n"
MIDDLEWARE = "from ahe.runtime import Middleware\n\nclass Noop(Middleware):\n    pass\n"


def sources(root: Path) -> Path:
    return write_files(root / "harness-docs", {
        "guides/verify.md": "# Verify before you finish\nAlways compare the output with the specification.\n",
        "README.md": "Notes from another agent harness.\n",
    })


def explore_steps() -> list:
    return [
        call("list_files", path="/experiment/harness-docs"),
        call("read_file", path="/experiment/harness-docs/guides/verify.md"),
        call("write_file", path="middleware/noop.py", content=MIDDLEWARE),
        call("record_change", component="middleware", files=["middleware/noop.py"], summary="a middleware, not a skill",
             root_cause="not the explore agent's business", targeted_fix="refused by the component limit"),
        call("write_file", path="skills/verify-before-finish/SKILL.md", content=SKILL),
        call("edit_file", path="agent.yaml", old_string="skills: []", new_string="skills: [skills/verify-before-finish]"),
        call("record_change", component="skill", files=["skills/verify-before-finish/SKILL.md", "agent.yaml", "middleware/noop.py"],
             summary="skill: verify the output before finishing",
             failure_evidence=[{"task": "harness-docs", "ref": "harness-docs/guides/verify.md", "note": "the guide's checklist"}],
             root_cause="agents finish without checking their output against the specification",
             targeted_fix="a skill with the verification steps", predicted_fixes=[]),
        call("finish", message="one skill"),
        call("finish", message="discard the rest"),  # the first finish warns about uncommitted edits
    ]


@pytest.mark.bwrap
async def test_explore_records_a_skill_from_a_local_source(tmp_path, mock_llm):
    from ahe.harness.repo import HarnessRepo

    repo = HarnessRepo.create(tmp_path / "workspace", SEED)
    base = repo.head()
    src = sources(tmp_path / "src")
    (src / "blob.bin").write_bytes(b"\x00\x01binary")
    mock = mock_llm({"rules": scripted_rules(explore_steps(), when={"first_user_contains": "Explore."})})
    out = tmp_path / "iterations/001/explore"
    role = RoleConfig(model="mock-explore", base_url=mock.url, max_attempts=2, backoff_initial_sec=0.01, timeout_sec=10)
    manifest = await run_explore_phase(repo=repo, sources=[str(src)], out_dir=out, role=role, tasks_dir=None)
    assert manifest.infra_error is None and manifest.stop_reason == "stop_tool"
    # a middleware is refused (not a skill), and so is a skill entry that carries the middleware's
    # file along; the leftovers are discarded when the agent finishes: nothing but skills can land.
    first = mock.requests[0]
    assert "/experiment/harness-docs/" in first["messages"][-1]["content"]
    tool_results = [m["content"] for m in mock.requests[-1]["messages"] if m["role"] == "tool"]
    assert any("component: 'middleware' is not one of ['skill']" in r for r in tool_results)  # the tool's schema
    assert any("['middleware/noop.py']: outside what you may change (skills/, agent.yaml)" in r for r in tool_results)
    assert not manifest.accepted() and repo.head() == base
    assert json.loads((out / "sources.json").read_text())["names"] == ["harness-docs"]
    assert (out / "sources/harness-docs/guides/verify.md").is_file() and not (out / "sources/harness-docs/blob.bin").exists()


@pytest.mark.bwrap
async def test_explore_skill_is_accepted_by_the_gate_with_a_manifest(tmp_path, mock_llm):
    from ahe.harness.repo import HarnessRepo

    repo = HarnessRepo.create(tmp_path / "workspace", SEED)
    base = repo.head()
    src = sources(tmp_path / "src")
    steps = [s for s in explore_steps()[:-1] if not (s[1].get("path") == "middleware/noop.py" or s[1].get("component") == "middleware")]
    steps = [(t, {**a, "files": [f for f in a["files"] if f != "middleware/noop.py"]}) if t == "record_change" else (t, a)
             for t, a in steps]
    mock = mock_llm({"rules": scripted_rules(steps, when={"first_user_contains": "Explore."})})
    out = tmp_path / "iterations/001/explore"
    role = RoleConfig(model="mock-explore", base_url=mock.url, max_attempts=2, backoff_initial_sec=0.01, timeout_sec=10)
    manifest = await run_explore_phase(repo=repo, sources=[str(src)], out_dir=out, role=role, tasks_dir=None)
    [change] = manifest.changes
    assert change.status == "accepted", change.gate_errors
    assert change.origin == "explore" and change.component == "skill" and change.id == "chg-1"
    assert change.evidence_missing == []  # the cited source file exists in the snapshot
    assert repo.head() == change.commit and repo.repo.commit(change.commit).parents[0].hexsha == base
    assert (repo.path / "skills/verify-before-finish/SKILL.md").read_text() == SKILL
    saved = json.loads((out / "manifest.json").read_text())
    assert saved["changes"][0]["origin"] == "explore" and (out / "trajectory.json").is_file()


def test_snapshot_names_and_missing_source(tmp_path):
    from ahe.errors import ConfigError

    a = write_files(tmp_path / "a/docs", {"x.md": "x\n"})
    b = write_files(tmp_path / "b/docs", {"y.md": "y\n"})
    snap = snapshot_sources([str(a), str(b), "http://127.0.0.1:9/nothing"], tmp_path / "snap")
    assert snap.names == ["docs", "docs-2"] and snap.files == 2
    assert any("not fetched" in n for n in snap.notes)
    with pytest.raises(ConfigError, match="explore.sources: .*does not exist"):
        snapshot_sources([str(tmp_path / "nope")], tmp_path / "snap2")


def test_record_change_refuses_other_classes_and_registry_keys(tmp_path):
    from ahe.harness.manifest import Manifest
    from ahe.harness.repo import HarnessRepo
    from evolve_agent import tools_impl
    from evolve_agent.confine import Confinement
    from evolve_agent.context import EvolveContext, EvolveLimits
    from evolve_agent.protected import BaseSnapshot

    repo = HarnessRepo.create(tmp_path / "workspace", SEED)
    base = repo.head()
    ctx = EvolveContext(repo=repo, confinement=Confinement(repo.path, None), base_commit=base,
                        base=BaseSnapshot.from_commit(repo, base), manifest=Manifest(iteration=1, base_commit=base),
                        limits=EvolveLimits(), iteration=1, experiment_dir=None, allowed_components=frozenset({"skill"}),
                        allowed_paths=("skills/", "agent.yaml"), registry_keys=frozenset({"skills"}))
    fields = dict(summary="a change of the wrong class", root_cause="testing scope", targeted_fix="refused")
    out = tools_impl.record_change(ctx, None, component="middleware", files=["agent.yaml"], **fields)
    assert "component 'middleware' is not yours to change here" in out.content
    text = (repo.path / "agent.yaml").read_text()
    (repo.path / "agent.yaml").write_text(text.replace("max_turns: 100", "max_turns: 7"))
    out = tools_impl.record_change(ctx, None, component="skill", files=["agent.yaml"], **fields)
    assert "you may change only skills, not max_turns" in out.content and repo.head() == base
