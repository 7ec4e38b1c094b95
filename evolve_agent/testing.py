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

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    repo = HarnessRepo.create(root / "workspace", seed)
    (root / "history.md").write_text("# History\n\n- iteration 1: seed harness evaluated\n")
    it = root / "iterations" / f"{iteration:03d}"
    (it / "analysis").mkdir(parents=True, exist_ok=True)
    if overview is not None:
        (it / "analysis" / "overview.md").write_text(overview)
    if results is not None:
        data = {"tasks": {name: {"pass_rate": rate} for name, rate in results.items()}}
        (it / "results.json").write_text(json.dumps(data))
    return root, repo
