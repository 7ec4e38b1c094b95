"""Helpers to drive the evolve agent with the scripted MOCK model (tests and demos only).

`scripted_rules(steps, when=...)` turns a list of tool calls into mock-policy rules: the
i-th model call of a matching conversation makes the i-th call. Arguments are sent as raw
JSON strings, so file contents are never treated as templates by the mock.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Step = tuple[str, dict[str, Any]]


def call(tool: str, **arguments: Any) -> Step:
    return (tool, arguments)


def scripted_rules(steps: list[Step], *, when: dict[str, Any] | None = None, name: str = "evolve") -> list[dict[str, Any]]:
    """One rule per step, matched on the turn number (and `when`, a mock-policy `match` block)."""
    rules = []
    for i, (tool, args) in enumerate(steps, 1):
        match = dict(when or {})
        match["turn"] = i
        rules.append({"name": f"{name} #{i} {tool}", "match": match,
                      "tool_calls": [{"name": tool, "arguments": json.dumps(args)}]})
    return rules


def make_experiment(root: Path, seed: Path, *, iteration: int = 1, overview: str | None = None,
                    results: dict[str, float] | None = None) -> tuple[Path, Any]:
    """A minimal run folder: `workspace/` (a HarnessRepo of `seed`), history.md and iteration files."""
    from ahe.harness.repo import HarnessRepo
    from ahe.rollout.models import RunResults, TaskSummary
    from ahe.run_folder import RunFolder, write_model

    run = RunFolder(root)
    run.root.mkdir(parents=True, exist_ok=True)
    repo = HarnessRepo.create(run.workspace, seed)
    run.history_md.write_text("# History\n\n- iteration 1: seed harness evaluated\n")
    it = run.iteration(iteration)
    it.analysis.mkdir(parents=True, exist_ok=True)
    if overview is not None:
        (it.analysis / "overview.md").write_text(overview)
    if results is not None:  # two trials per task, as many passing as the rate says
        tasks = {name: TaskSummary(task=name, trials=2, passed=round(2 * rate), pass_rate=round(2 * rate) / 2,
                                   pass_at_k=float(rate > 0), rewards=[1.0] * round(2 * rate) + [0.0] * (2 - round(2 * rate)))
                 for name, rate in results.items()}
        n = sum(t.passed for t in tasks.values())
        write_model(it.results_json, RunResults(k=2, tasks=tasks, n_trials=2 * len(tasks), n_passed=n,
                                                pass_at_1=n / (2 * len(tasks)) if tasks else 0.0, pass_at_k=0.0,
                                                infra_errors=0, timeouts=0, verifier_errors=0))
    return run.root, repo
