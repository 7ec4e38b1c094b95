"""`ahe ablate`: composing seed + only a class / evolved − a class, and the demo's known effects.

The demo's iteration-1 harness (tag iter-001) holds two changes of two classes: the memory
lesson (its scripted agent then solves word-frequency-top) and the StrictMode middleware
(its note makes the agent fail fix-service-config). So "only long_term_memory" must fix
word-frequency-top and break nothing, "only middleware" must break fix-service-config, and
"without middleware" is the same folder as "only long_term_memory" (evaluated once).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ahe.demo import X, Y
from ahe.experiments.compose import compose, diff_harnesses, read_tree, validate
from evolve_agent.workspace_load import load_problem
from tests.conftest import SEED
from tests.shared_runs import copy_run, line_demo

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

COUNT_TOOL = '''
def count_lines(path: str) -> str:
    """How many lines a file has."""
    with open(path) as f:
        return str(sum(1 for _ in f))
'''


def evolved_harness(root: Path) -> Path:
    """The seed plus one change of five classes (prompt, a tool description, a new tool, a skill, memory)."""
    shutil.copytree(SEED, root, ignore=shutil.ignore_patterns(".git", "__pycache__"))
    (root / "systemprompt.md").write_text((root / "systemprompt.md").read_text() + "\nKeep a short plan.\n")
    (root / "LongTermMEMORY.md").write_text("- Check the output format.\n")
    desc = yaml.safe_load((root / "tool_descriptions/run_shell_command.tool.yaml").read_text())
    desc["description"] += " Quote paths with spaces."
    (root / "tool_descriptions/run_shell_command.tool.yaml").write_text(yaml.safe_dump(desc, sort_keys=False))
    (root / "tools/count.py").write_text(COUNT_TOOL)
    (root / "tool_descriptions/count_lines.tool.yaml").write_text(yaml.safe_dump({
        "name": "count_lines", "description": "Count the lines of a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}))
    (root / "skills/plan").mkdir(parents=True)
    (root / "skills/plan/SKILL.md").write_text("---\nname: plan\ndescription: Plan before acting.\n---\nWrite a plan.\n")
    reg = yaml.safe_load((root / "agent.yaml").read_text())
    reg["tools"].append({"name": "count_lines", "description": "tool_descriptions/count_lines.tool.yaml",
                         "binding": "tools.count:count_lines"})
    reg["skills"] = ["skills/plan"]
    (root / "agent.yaml").write_text(yaml.safe_dump(reg, sort_keys=False))
    return root


def test_compose_each_class_loads_and_merges_registrations(tmp_path):
    evo = evolved_harness(tmp_path / "evolved")
    d = diff_harnesses(SEED, evo)
    assert d.classes == ["system_prompt", "tool_description", "tool_implementation", "skill", "long_term_memory"]
    assert d.registry == {"tool_implementation": ["tools[count_lines]"], "skill": ["skills"]}

    full = compose(SEED, evo, set(d.classes), d, tmp_path / "full")
    assert read_tree(full.path) == read_tree(evo) and not full.notes
    seed = compose(SEED, evo, set(), d, tmp_path / "seed")
    assert read_tree(seed.path) == read_tree(SEED)

    impl = compose(SEED, evo, {"tool_implementation"}, d, tmp_path / "impl")
    reg = yaml.safe_load((impl.path / "agent.yaml").read_text())
    assert [t["name"] for t in reg["tools"]] == ["run_shell_command", "count_lines"] and reg["skills"] == []
    assert impl.notes == ["tool_descriptions/count_lines.tool.yaml taken from the evolved harness: "
                          "tools[count_lines].description needs it"]
    assert (impl.path / "systemprompt.md").read_text() == (SEED / "systemprompt.md").read_text()
    assert (impl.path / "tool_descriptions/run_shell_command.tool.yaml").read_bytes() == \
        (SEED / "tool_descriptions/run_shell_command.tool.yaml").read_bytes()

    no_impl = compose(SEED, evo, set(d.classes) - {"tool_implementation"}, d, tmp_path / "no-impl")
    reg = yaml.safe_load((no_impl.path / "agent.yaml").read_text())
    assert [t["name"] for t in reg["tools"]] == ["run_shell_command"] and reg["skills"] == ["skills/plan"]
    assert not (no_impl.path / "tools/count.py").exists()
    assert "Quote paths" in (no_impl.path / "tool_descriptions/run_shell_command.tool.yaml").read_text()

    skill = compose(SEED, evo, {"skill"}, d, tmp_path / "skill")
    assert yaml.safe_load((skill.path / "agent.yaml").read_text())["skills"] == ["skills/plan"]
    for c in (full, impl, no_impl, skill):
        assert load_problem(c.path) is None, c.path
    assert asyncio.run(validate(impl.path, SEED)) == []

    # a composed folder that breaks a protected part is rejected like a change at the gate
    (skill.path / "agent.yaml").write_text((skill.path / "agent.yaml").read_text().replace("temperature: 0.7", "temperature: 0.1"))
    assert any("llm block" in e for e in asyncio.run(validate(skill.path, SEED)))


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    """The demo run (built once a session, tests/shared_runs.py; read only)."""
    return line_demo(tmp_path_factory)


def _ablate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ahe.cli", "ablate", *args], capture_output=True, text=True,
                          timeout=240, cwd=REPO, env={**__import__("os").environ, "COLUMNS": "250"})


def test_demo_ablation_shows_the_scripted_effects(demo_run, tmp_path):
    proc = _ablate(f"{demo_run}@1", "--tasks", str(REPO / "examples/tasks"), "-k", "2", "--out", str(tmp_path / "a"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    assert data == json.loads((tmp_path / "a/ablation.json").read_text()) and data["mock"]
    assert data["classes"] == ["middleware", "long_term_memory"]
    v = {x["label"]: x for x in data["variants"]}
    assert set(v) == {"seed", "full", "only middleware", "only long_term_memory", "without middleware",
                      "without long_term_memory"}
    assert all(not x["errors"] for x in v.values())
    mem, mw = v["only long_term_memory"], v["only middleware"]
    assert (mem["fixes"], mem["breaks"]) == ([X], [])
    assert (mw["fixes"], mw["breaks"]) == ([], [Y])
    assert mem["metrics"]["pass_at_1"] == pytest.approx(2 / 3) and v["seed"]["metrics"]["pass_at_1"] == pytest.approx(1 / 3)
    assert mem["vs_seed"]["delta_points"] == pytest.approx(100 / 3) and mw["vs_seed"]["delta_points"] == pytest.approx(-100 / 3)
    assert mem["metrics"]["by_difficulty"]["easy"]["trials"] == 6
    assert v["without middleware"]["tree"] == mem["tree"] and v["without middleware"]["eval_dir"] == mem["eval_dir"]
    assert data["additivity"] == {"sum_of_single_class_gains": pytest.approx(0.0), "full_gain": pytest.approx(0.0),
                                  "interaction": pytest.approx(0.0)}
    tok = mem["metrics"]["tokens_per_trial"]
    assert tok > 0 and mem["metrics"]["successes_per_mtok"] == pytest.approx(4 * 1e6 / (6 * tok))

    # the user's command on the run folder: its best harness, the table, resumable into RUN_DIR/ablation
    demo_run = copy_run(demo_run, tmp_path / "run")  # it writes into the run
    proc = _ablate(str(demo_run), "--tasks", str(REPO / "examples/tasks"), "-k", "2")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if "only long_term_memory" in ln)
    assert "0.667" in line and X in line and "+33.3" in line
    assert "non-additivity" in proc.stdout
    results = sorted((demo_run / "ablation/evals").glob("*/rollouts/*/*/result.json"))
    before = {p: p.stat().st_mtime_ns for p in results}
    assert len(before) == 2 * 3 * 2  # seed and full (only memory = full): 3 tasks × k=2 each
    assert _ablate(str(demo_run), "--tasks", str(REPO / "examples/tasks"), "-k", "2").returncode == 0
    assert before == {p: p.stat().st_mtime_ns for p in results}


def test_nothing_to_ablate_is_one_sentence(tmp_path):
    proc = _ablate(str(SEED), "--tasks", str(REPO / "examples/tasks"), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "nothing to ablate" in proc.stderr and "Traceback" not in proc.stderr
