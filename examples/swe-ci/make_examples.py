"""Rebuild the bundled SWE-CI examples: tiny git repositories → `ahe tasks make swe-ci`.

    python examples/swe-ci/make_examples.py [--out examples/swe-ci] [--repos DIR]

Each project in sources.py becomes a git repository with three commits (fixed author and
dates, so the commit ids, and so the task folders, come out the same every time); the task
goes from an older commit to the newest one through AHE's own task source, with a CI loop of
3 rounds and gamma = 2. It also writes mock-policy.yaml: a scripted MOCK Architect and a MOCK
Programmer that, round by round, writes the module versions listed in sources.py — part of
the target diff plus one regressing hunk — so the rounds' a(c_i), EvoScore and
zero-regression are known in advance (see README.md here).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from sources import CAREFUL_ROUNDS, LESSON, PROJECTS, render, render_tests  # noqa: E402

BASE_COMMIT = {"textstats": 0, "intervals": 1, "units": 1}  # index of the base commit
ROUNDS, GAMMA = 3, 2.0


def _git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "AHE Example", "GIT_AUTHOR_EMAIL": "example@ahe.invalid",
           "GIT_COMMITTER_NAME": "AHE Example", "GIT_COMMITTER_EMAIL": "example@ahe.invalid",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    if date:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True).stdout.strip()


def build_repo(name: str, dest: Path) -> list[str]:
    """A repository with one commit per entry of the project's history; returns the commit ids."""
    module, functions, tests, commits, _ = PROJECTS[name]
    dest.mkdir(parents=True)
    _git(dest, "init", "-q", "-b", "main")
    shas = []
    for i, names in enumerate(commits):
        (dest / f"{module}.py").write_text(render(functions, names, module))
        (dest / "tests").mkdir(exist_ok=True)
        (dest / "tests" / "__init__.py").write_text("")
        (dest / "tests" / f"test_{module}.py").write_text(render_tests(tests, names, module))
        (dest / "README.md").write_text(f"# {module}\n\nFunctions: {', '.join(names)}.\n")
        _git(dest, "add", "-A")
        _git(dest, "commit", "-q", "-m", f"{module}: {', '.join(names)}", date=f"2025-01-0{i + 1}T12:00:00+00:00")
        shas.append(_git(dest, "rev-parse", "HEAD"))
    return shas


def mock_policy() -> dict:
    """The MOCK Architect and Programmer of the examples (rules matched on the round and project)."""
    rules = [{"name": "architect", "match": {"system_contains": "You are the Architect"},
              "reply": "<requirements>\n1. Make the failing behaviours of the CI report exist, module by module — "
                       "the target tests pass.\n</requirements>"}]
    for name, (module, functions, _, _, rounds) in PROJECTS.items():
        versions = [(f"{name}-round-{i}-careful", i, names, True) for i, names in CAREFUL_ROUNDS.get(name, {}).items()]
        versions += [(f"{name}-round-{i}", i, names, False) for i, names in enumerate(rounds, start=1)]
        for rule_name, i, names, careful in versions:
            code = render(functions, names, module)
            match = {"first_user_contains": f"CI round {i} of", "last_tool_result_contains": f"{module}.py",
                     "last_tool_result_not_contains": "written"}
            if careful:
                match["system_contains"] = LESSON.strip()
            rules.append({"name": rule_name, "match": match, "tool_calls": [{"name": "run_shell_command", "arguments": {
                "command": f"cat > /app/{module}.py <<'PYEOF'\n{code}PYEOF\necho written {module}.py"}}]})
    rules += [
        {"name": "look", "match": {"turn": 1}, "tool_calls": [{"name": "run_shell_command", "arguments": {"command": "ls /app"}}]},
        {"name": "done", "match": {"last_tool_result_contains": "written"}, "reply": "Implemented this round's requirements."},
    ]
    return {"name": "swe-ci-examples (MOCK Architect and Programmer)", "rules": rules,
            "default": {"reply": "mock: nothing to do this round"}}


def evolve_policy() -> dict:
    """The MOCK evolve agent: in iteration 1 it adds the lesson to memory, predicting fixes
    on textstats and units; later iterations change nothing."""
    change = {
        "component": "long_term_memory", "kind": "new", "files": ["LongTermMEMORY.md"],
        "summary": "Lesson: run the whole suite before finishing a CI round; keep passing tests passing",
        "failure_evidence": [{"task": "units", "ref": "corpus/units/trial-1/index.md",
                              "note": "round 2 broke a test that passed in round 1"}],
        "root_cause": "The Programmer finishes a round without re-running the suite, so a regressing edit ships.",
        "targeted_fix": "A standing lesson to run every test before finishing a round and to keep passing ones passing.",
        "why_this_component": "A working habit for every session: long-term memory is the lightest place for it.",
        "predicted_fixes": ["textstats", "units"], "predicted_regressions": [],
    }
    return {"name": "swe-ci-examples evolve agent (scripted MOCK)", "rules": [
        {"match": {"first_user_contains": "Iteration 1.", "turn": 1},
         "tool_calls": [{"name": "write_file", "arguments": {"path": "LongTermMEMORY.md", "content": LESSON}}]},
        {"match": {"first_user_contains": "Iteration 1.", "turn": 2},
         "tool_calls": [{"name": "record_change", "arguments": change}]},
        {"match": {"first_user_contains": "Iteration 1.", "turn": 3},
         "tool_calls": [{"name": "finish", "arguments": {"message": "Added the CI-round lesson to memory."}}]},
    ], "default": {"tool_calls": [{"name": "finish", "arguments": {"message": "No further changes this iteration."}}]}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--repos", type=Path, default=None, help="keep the repositories here (default: a temporary folder)")
    args = ap.parse_args(argv)
    from ahe.tasks.sources.swe_ci.layout import CISettings
    from ahe.tasks.sources.swe_ci.maker import make_task

    with tempfile.TemporaryDirectory(prefix="ahe-swe-ci-repos-") as tmp:
        repos = args.repos or Path(tmp)
        for name in PROJECTS:
            repo = repos / name
            if repo.exists():
                shutil.rmtree(repo)
            shas = build_repo(name, repo)
            res = make_task(repo, shas[BASE_COMMIT[name]], shas[-1], args.out, name=name, min_gap=5,
                            ci=CISettings(rounds=ROUNDS, gamma=GAMMA), force=True,
                            repo_label=f"examples/swe-ci/sources.py:{name}")
            print(f"{name}: n(c0)={res.n_base} n(c*)={res.n_target} gap={res.gap} -> {res.path or res.reason}")
    (args.out / "mock-policy.yaml").write_text(
        "# Generated by make_examples.py: a scripted MOCK Architect and MOCK Programmer.\n"
        + yaml.safe_dump(mock_policy(), sort_keys=False, width=120))
    (args.out / "evolve-policy.yaml").write_text(
        "# Generated by make_examples.py: a scripted MOCK evolve agent.\n"
        + yaml.safe_dump(evolve_policy(), sort_keys=False, width=120))
    return 0


if __name__ == "__main__":
    sys.exit(main())
