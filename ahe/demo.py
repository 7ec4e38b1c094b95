"""`ahe demo`: the whole loop offline, on three bundled tasks, with scripted MOCK models.

The scenario (also the loop's end-to-end test):

- the code agent's mock solves `word-frequency-top` (X) only when its memory holds the
  lesson "compare your output byte for byte", always solves `fix-service-config` (Y) with one
  shell command that rewrites `config/service.ini`, and never solves `fix-backup-script` (Z);
- the evolve agent's mock, in iteration 1, records two changes: the lesson in
  LongTermMEMORY.md (predicting X) and a StrictMode middleware that refuses commands
  overwriting files under `config/` (predicting Z, risking nothing); later iterations change
  nothing;
- regression foresight replays the middleware over iteration 1's recorded trials at
  `record_change`: it would deny Y's recorded command, so Y goes into the change's
  `replay_at_risk` — the regression only the replay foresaw (the agent predicted none);
- so iteration 2 sees X improve and Y regress (its command is now denied): the lesson is kept,
  the middleware is rolled back automatically ("predicted fix did not improve; regression of
  Y foreseen by replay"), and pass@1 rises from 1/3 to 2/3 in iteration 3.

With `--search tree`, `tree_rules()` scripts the evolve agent per round, tree child and parent
node (two branches, a merge, a rollback, a best node off the first branch: docs/search.md), and
`tree_agent_rules()` lets the code agent solve Z once its memory holds the backup lesson.

Every model here is a scripted mock, and the policies written into the demo folder say so.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

import debugger
from ahe.resources import bundled, example_tasks

DEBUGGER_POLICY = Path(debugger.__file__).resolve().parent / "mock_policy.yaml"

TASKS = example_tasks()
X, Y, Z = "word-frequency-top", "fix-service-config", "fix-backup-script"
LESSON = "- Before you finish, compare your output byte for byte with the format the instructions specify.\n"
STRICT_NOTE = "strict mode: do not overwrite configuration files you did not create."

MIDDLEWARE = f'''"""Refuses shell commands that overwrite files under config/ (the agent did not create them)."""

from ahe.runtime import HookResult, Middleware


class StrictMode(Middleware):
    def before_tool(self, ctx, call):
        command = (call.arguments or {{}}).get("command", "")
        if "> config/" in command or ">config/" in command:
            return HookResult(deny={STRICT_NOTE!r})
        return None
'''


def _shell(command: str) -> dict:
    return {"name": "run_shell_command", "arguments": {"command": command}}


def agent_policy(tasks: Path = TASKS) -> dict:
    solve = {t: (tasks / t / "solution" / "solve.sh").read_text() for t in (X, Y)}
    title = {t: (tasks / t / "instruction.md").read_text().splitlines()[0] for t in (X, Y, Z)}
    return {
        "name": "demo code agent (scripted MOCK)",
        "rules": [
            {"name": "X needs the lesson", "match": {"turn": 1, "first_user_contains": title[X], "system_contains": "byte for byte"},
             "tool_calls": [_shell(solve[X])]},
            {"name": "Y in one command", "match": {"turn": 1, "first_user_contains": title[Y]},
             "tool_calls": [_shell(solve[Y])]},
            {"name": "wrap up", "match": {"turn_min": 2}, "reply": "Done."},
        ],
        "default": {"reply": "I could not complete this task."},
    }


def evolve_policy() -> dict:
    lesson_change = {
        "component": "long_term_memory",
        "kind": "new",
        "files": ["LongTermMEMORY.md"],
        "summary": "Lesson: check the exact output format before finishing",
        "failure_evidence": [{"task": X, "ref": f"corpus/{X}/trial-1/index.md", "note": "the agent stopped without checking its output format"}],
        "root_cause": "The agent ends as soon as it has produced some output, without checking it against the required format.",
        "targeted_fix": "A standing lesson to compare the output with the specified format before finishing.",
        "why_this_component": "A general habit, not tied to a tool: long-term memory is the lightest place for it.",
        "predicted_fixes": [X],
        "predicted_regressions": [],
    }
    middleware_change = {
        "component": "middleware",
        "kind": "new",
        "files": ["middleware/strict_mode.py", "agent.yaml"],
        "summary": "StrictMode middleware: refuse commands that overwrite configuration files",
        "failure_evidence": [{"task": Z, "ref": f"corpus/{Z}/trial-1/index.md", "note": "the agent gave up on the script"}],
        "root_cause": "The agent edits files it should not touch and loses track of the task.",
        "targeted_fix": "Deny shell commands that overwrite files under config/, which the agent did not create.",
        "why_this_component": "A rule that must hold in every session is enforced best by middleware.",
        "predicted_fixes": [Z],
        "predicted_regressions": [],
    }
    return {
        "name": "demo evolve agent (scripted MOCK)",
        "rules": [
            {"match": {"first_user_contains": "Iteration 1.", "turn": 1},
             "tool_calls": [{"name": "write_file", "arguments": {"path": "LongTermMEMORY.md", "content": LESSON}}]},
            {"match": {"first_user_contains": "Iteration 1.", "turn": 2},
             "tool_calls": [{"name": "record_change", "arguments": lesson_change}]},
            {"match": {"first_user_contains": "Iteration 1.", "turn": 3},
             "tool_calls": [{"name": "write_file", "arguments": {"path": "middleware/strict_mode.py", "content": MIDDLEWARE}}]},
            {"match": {"first_user_contains": "Iteration 1.", "turn": 4},
             "tool_calls": [{"name": "edit_file", "arguments": {
                 "path": "agent.yaml", "old_string": "middleware: []",
                 "new_string": 'middleware:\n  - binding: "middleware.strict_mode:StrictMode"'}}]},
            {"match": {"first_user_contains": "Iteration 1.", "turn": 5},
             "tool_calls": [{"name": "record_change", "arguments": middleware_change}]},
            {"match": {"first_user_contains": "Iteration 1.", "turn": 6},
             "tool_calls": [{"name": "finish", "arguments": {"message": "Recorded a memory lesson and a StrictMode middleware."}}]},
        ],
        "default": {"tool_calls": [{"name": "finish", "arguments": {"message": "No further changes this iteration."}}]},
    }


SKILL = ("---\nname: verify-output\ndescription: Check the output against the stated format before finishing.\n---\n"
         "1. Re-read the instruction's output specification.\n2. Print what you wrote and compare it, byte for byte.\n")


def explore_policy(source: str = "playbook") -> dict:
    """The explore agent's mock: reads the source's guide and records one skill from it."""
    steps = [
        ("read_file", {"path": f"/experiment/{source}/verify.md"}),
        ("write_file", {"path": "skills/verify-output/SKILL.md", "content": SKILL}),
        ("edit_file", {"path": "agent.yaml", "old_string": "skills: []", "new_string": "skills: [skills/verify-output]"}),
        ("record_change", {"component": "skill", "files": ["skills/verify-output/SKILL.md", "agent.yaml"],
                           "summary": "skill: verify the output before finishing",
                           "failure_evidence": [{"task": source, "ref": f"{source}/verify.md", "note": "the playbook's checklist"}],
                           "root_cause": "agents stop before checking their output against the specification",
                           "targeted_fix": "a skill with the verification steps, loaded when needed"}),
        ("finish", {"message": "one skill from the playbook"}),
    ]
    return {"name": "demo explore agent (scripted MOCK)", "rules": [
        {"match": {"first_user_contains": "Explore.", "turn": i}, "tool_calls": [{"name": t, "arguments": a}]}
        for i, (t, a) in enumerate(steps, 1)]}


def variant_rules() -> list[dict]:
    """Best-of-2: variant 2 of the evolve agent records only the lesson (variant 1 also the middleware)."""
    lesson = evolve_policy()["rules"][1]["tool_calls"][0]["arguments"]
    steps = [("write_file", {"path": "LongTermMEMORY.md", "content": LESSON}), ("record_change", lesson),
             ("finish", {"message": "Recorded the memory lesson only."})]
    return [{"match": {"first_user_contains": "variant 2 of 2", "turn": i}, "tool_calls": [{"name": t, "arguments": a}]}
            for i, (t, a) in enumerate(steps, 1)]


BACKUP_LESSON = ("- Backup scripts: quote every path, handle names with spaces or newlines, skip tmp/ folders, "
                 "and write the MANIFEST sorted.\n")


def tree_agent_rules(tasks: Path = TASKS) -> list[dict]:
    """`search: tree` only: the code agent's mock also solves Z once its memory holds the backup lesson."""
    title = (tasks / Z / "instruction.md").read_text().splitlines()[0]
    solve = (tasks / Z / "solution" / "solve.sh").read_text()
    return [{"name": "Z needs the backup lesson", "match": {"turn": 1, "first_user_contains": title, "system_contains": "quote every path"},
             "tool_calls": [_shell(solve)]}]


def _steps(when: list[str], calls: list[dict]) -> list[dict]:
    return [{"match": {"first_user_contains": when, "turn": i}, "tool_calls": [call]} for i, call in enumerate(calls, 1)]


def tree_rules() -> list[dict]:
    """`search: tree` (the tree's story, docs/search.md): round 1's tree child 1 records only the
    middleware (the first branch: Y regresses), child 2 only the lesson (the line follows it);
    round 2's child on node-002 (whichever child number the rule gives it) brings the middleware back
    (Y regresses again: iteration 3's attribution rolls it back, a `rollback` node); round 3's child
    on node-002 records a backup lesson that solves Z (the best node). Every other call changes nothing."""
    rules = evolve_policy()["rules"]
    lesson, strict = rules[1]["tool_calls"][0]["arguments"], rules[4]["tool_calls"][0]["arguments"]
    middleware = [rules[2]["tool_calls"][0], rules[3]["tool_calls"][0], {"name": "record_change", "arguments": strict}]
    one = middleware + [{"name": "finish", "arguments": {"message": "Recorded the StrictMode middleware only."}}]
    two = [{"name": "write_file", "arguments": {"path": "LongTermMEMORY.md", "content": LESSON}},
           {"name": "record_change", "arguments": lesson}, {"name": "finish", "arguments": {"message": "Recorded the lesson only."}}]
    again = middleware + [{"name": "finish", "arguments": {"message": "Recorded the StrictMode middleware on the lesson's branch."}}]
    backup = {**lesson, "summary": "Lesson: robust backup scripts (quoting, odd names, a sorted MANIFEST)",
              "failure_evidence": [{"task": Z, "ref": f"corpus/{Z}/trial-1/index.md", "note": "the agent gave up on the script"}],
              "root_cause": "The agent does not know what makes a backup script robust to real-world file names.",
              "targeted_fix": "A standing lesson on quoting, odd file names, skipping tmp/ and a sorted MANIFEST.",
              "predicted_fixes": [Z]}
    fix = [{"name": "edit_file", "arguments": {"path": "LongTermMEMORY.md", "old_string": LESSON, "new_string": LESSON + BACKUP_LESSON}},
           {"name": "record_change", "arguments": backup}, {"name": "finish", "arguments": {"message": "Recorded the backup lesson."}}]
    return (_steps(["Iteration 1.", "tree child 1 of 2"], one) + _steps(["Iteration 1.", "tree child 2 of 2"], two)
            + _steps(["Iteration 2.", "expanding node-002"], again)
            + _steps(["Iteration 3.", "expanding node-002"], fix))


# ------------------------------------------------------------------ `ahe demo --backend mini-swe-agent`
# The same story on a mini-swe-agent harness (examples/mini-swe-agent: mini's own mini.yaml): the
# lesson goes into mini's system_template (kept), the strict rule into its instance_template
# (rolled back: it predicted Z, and Y regresses). mini is not replayable, so no replay foresight.
MINI_LESSON = "    Before you finish, compare your output byte for byte with the format the instructions specify.\n"
MINI_PROMPT_LINE = "    You are a helpful assistant that can interact with a computer.\n"
MINI_RULES_LINE = "    ## Command Execution Rules\n"
MINI_STRICT = "Strict mode: do not overwrite configuration files you did not create."
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def _bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command}}


def mini_agent_policy(tasks: Path = TASKS) -> dict:
    """The code agent's mock in mini's tool-call format (its `bash` tool, then its submit command)."""
    solve = {t: (tasks / t / "solution" / "solve.sh").read_text() for t in (X, Y)}
    title = {t: (tasks / t / "instruction.md").read_text().splitlines()[0] for t in (X, Y, Z)}
    return {
        "name": "demo code agent, mini-swe-agent's format (scripted MOCK)",
        "rules": [
            {"name": "X needs the lesson", "match": {"turn": 1, "first_user_contains": title[X], "system_contains": "byte for byte"},
             "tool_calls": [_bash(solve[X])]},
            {"name": "Y refused by the strict rule", "match": {"turn": 1, "first_user_contains": [title[Y], MINI_STRICT]},
             "tool_calls": [_bash(SUBMIT)]},
            {"name": "Y in one command", "match": {"turn": 1, "first_user_contains": title[Y]}, "tool_calls": [_bash(solve[Y])]},
            {"name": "submit", "match": {"tools_include": "bash"}, "tool_calls": [_bash(SUBMIT)]},
        ],
        "default": {"reply": "I could not complete this task."},
    }


def mini_evolve_policy() -> dict:
    """The evolve agent's mock for the mini harness: two edits of mini.yaml, each recorded."""
    rules = evolve_policy()["rules"]
    lesson, strict = rules[1]["tool_calls"][0]["arguments"], rules[4]["tool_calls"][0]["arguments"]
    lesson = {**lesson, "component": "system_prompt", "kind": "improvement", "files": ["mini.yaml"],
              "why_this_component": "A standing habit for every task: mini's system_template is read first in every session."}
    strict = {**strict, "component": "system_prompt", "kind": "improvement", "files": ["mini.yaml"],
              "summary": "Strict mode in the instance template: do not overwrite configuration files",
              "targeted_fix": "A rule in mini's instance_template (the task's own message) against overwriting config/ files.",
              "why_this_component": "mini has no middleware; the instance template is where its workflow rules live."}
    steps = [("edit_file", {"path": "mini.yaml", "old_string": MINI_PROMPT_LINE, "new_string": MINI_PROMPT_LINE + MINI_LESSON}),
             ("record_change", lesson),
             ("edit_file", {"path": "mini.yaml", "old_string": MINI_RULES_LINE,
                            "new_string": f"    {MINI_STRICT}\n\n" + MINI_RULES_LINE}),
             ("record_change", strict),
             ("finish", {"message": "Recorded a lesson in the system template and a strict rule in the instance template."})]
    return {
        "name": "demo evolve agent, mini-swe-agent harness (scripted MOCK)",
        "rules": [{"match": {"first_user_contains": "Iteration 1.", "turn": i}, "tool_calls": [{"name": t, "arguments": a}]}
                  for i, (t, a) in enumerate(steps, 1)],
        "default": {"tool_calls": [{"name": "finish", "arguments": {"message": "No further changes this iteration."}}]},
    }


BACKENDS = ("ahe", "mini-swe-agent")


def write_demo(directory: Path, *, iterations: int = 3, k: int = 2, debugger_policy: dict | None = None,
               variants: int = 1, explore_sources: list[str] | None = None, backend: str = "ahe",
               search: str = "line") -> Path:
    """Write the demo experiment (config + MOCK policies) into `directory`; returns the config path."""
    mini = backend == "mini-swe-agent"
    directory.mkdir(parents=True, exist_ok=True)
    pol = directory / "policies"
    pol.mkdir(exist_ok=True)
    header = "# A scripted MOCK model for `ahe demo` — no real model is involved.\n"
    agent = mini_agent_policy() if mini else agent_policy()
    if search == "tree" and not mini:
        agent["rules"] = tree_agent_rules() + agent["rules"]
    (pol / "agent.yaml").write_text(header + yaml.safe_dump(agent, sort_keys=False, width=200))
    evolve = mini_evolve_policy() if mini else evolve_policy()
    if variants > 1:
        evolve["rules"] = variant_rules() + evolve["rules"]
    if search == "tree":
        evolve["rules"] = tree_rules() + evolve["rules"]
    (pol / "evolve.yaml").write_text(header + yaml.safe_dump(evolve, sort_keys=False, width=200))
    if explore_sources:
        (pol / "explore.yaml").write_text(header + yaml.safe_dump(explore_policy(Path(explore_sources[0]).name),
                                                                  sort_keys=False, width=200))
    if debugger_policy is None:
        shutil.copyfile(DEBUGGER_POLICY, pol / "debugger.yaml")
    else:
        (pol / "debugger.yaml").write_text(header + yaml.safe_dump(debugger_policy, sort_keys=False, width=200))
    config = {
        "name": "demo",
        "tasks": str(TASKS),
        "include": [X, Y, Z],
        "iterations": iterations,
        "k": k,
        "concurrency": 4,
        "retry_infra": 0,
        "models": {role: {"model": f"mock-{role}"} for role in ("agent", "debugger", "evolve")},
        "mock_policies": {role: f"policies/{role}.yaml" for role in ("agent", "debugger", "evolve")},
        "evolve": {"max_turns": 20, "wall_clock_sec": 600},
        # the paper's δ-flip rule, explicitly: three tasks at k=2 show its verdicts (chg-1 keep, chg-2 rollback)
        # step by step; the default policy (expected-value) is judged on the simulator's suite instead
        "attribution": {"strictness": "paper"},
    }
    if mini:
        config["seed_workspace"] = str(bundled("examples/mini-swe-agent"))
    if variants > 1:
        config["variants"] = variants
    if search == "tree":
        config["search"] = "tree"
    if explore_sources:
        config["explore"] = {"sources": list(explore_sources), "max_turns": 10}
        config["mock_policies"]["explore"] = "policies/explore.yaml"
    path = directory / "config.yaml"
    path.write_text("# `ahe demo`: three bundled tasks, scripted MOCK models for every role.\n" + yaml.safe_dump(config, sort_keys=False))
    return path


def run_demo(directory: Path, *, quiet: bool = False, backend: str = "ahe", search: str = "line") -> Path:
    from ahe.errors import AheError
    from ahe.evolution.commands import evolve_command

    if backend not in BACKENDS:
        raise AheError(f"--backend: the demo runs on {' or '.join(BACKENDS)}, not {backend!r}")
    if directory.exists() and any(directory.iterdir()):
        raise AheError(f"{directory}: exists and is not empty; choose a new folder for the demo")
    if backend == "mini-swe-agent":
        from ahe.agents.mini_backend import MISSING, mini_installed

        if not mini_installed():
            raise AheError(MISSING)
    if search not in ("line", "tree"):
        raise AheError(f"--search: the demo runs search line or tree, not {search!r}")
    config = write_demo(directory, backend=backend, search=search)
    run = evolve_command(config, resume=None, run_dir=directory / "run", overrides={}, quiet=quiet)
    if search == "tree" and not quiet:
        from rich.console import Console
        from rich.markup import escape

        Console(stderr=True, soft_wrap=True).print(escape("\n".join(tree_facts(run))))
    return run


def tree_facts(run_dir: Path) -> list[str]:
    """What the tree did, as `ahe demo --search tree` ends: expansions, merges, rollbacks, pruned, best."""
    from ahe.evolution.tree.archive import load_tree
    from ahe.run_folder import RunFolder

    tree = load_tree(RunFolder(run_dir))
    out = [f"search tree (tree.json, `ahe audit {run_dir}`): {len(tree.nodes)} nodes"]
    for r in tree.rounds:
        made = [f"{p} → {c}" for p, c in zip(r.expansions, r.children) if c]
        out.append(f"  round {r.iteration}: expanded {', '.join(made) or 'nothing new'}"
                   + (f"; pruned {', '.join(r.pruned)}" if r.pruned else "") + f"; the line went on from {r.line}")
    for m in tree.merges:
        out.append(f"  merge, round {m.iteration}: " + (f"{m.node} — {m.reason}" if m.node else f"{' + '.join(m.parts)} — {m.reason}"))
    for n in tree.nodes:
        if n.kind == "rollback":
            out.append(f"  rollback, iteration {n.iteration}: {', '.join(n.rolled_back)} reverted on {n.parent} → {n.id}")
    if tree.best:
        best = tree.node(tree.best)
        lo, hi = best.interval()
        out.append(f"  best: {best.id}, estimated pass@1 {best.estimate()[0]:.3f} [{lo:.3f}, {hi:.3f}] over {best.n_trials} "
                   f"trials; path {' → '.join(tree.path(best.id))} (tagged best)")
    return out
