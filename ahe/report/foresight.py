"""Regression foresight in the audit and the report: what each change's replay put at risk,
and regression predictions scored for the agent, the replay and their union (docs/foresight.md).

Kept apart from audit.py so both readers (the `ahe audit` tables and the HTML report) take the
same fields, and so audit.py stays about verdicts.
"""

from __future__ import annotations

from typing import Any, Callable

from ahe.harness.manifest import ChangeEntry
from ahe.run_folder import Attribution

PENDING = "pending"
FORESIGHT_ROWS = (("replay_regression_predictions", "regression (replay)"),
                  ("union_regression_predictions", "regression (agent ∪ replay)"))


def change_fields(c: ChangeEntry, verdict: Any, outcome: Callable[[str], str] | None) -> dict:
    """The foresight columns of one change: at-risk tasks with what happened to them, the replay."""
    r = c.replay
    return {
        "replay_at_risk": {t: outcome(t) if outcome else PENDING for t in c.replay_at_risk},
        "replay": None if r is None else r.model_dump(include={"replayable", "reason", "kinds", "not_replayed",
                                                                 "tasks_touched", "first_steps", "middleware_errors",
                                                                 "report"}),
        "replay_regressions": list(getattr(verdict, "replay_regressions", []) or []),
    }


def iteration_fields(att: Attribution | None) -> dict:
    def block(name: str) -> dict | None:
        s = getattr(att, name, None) if att else None
        return None if s is None else s.model_dump()

    return {
        "replay_regression_predictions": block("replay_regression_predictions"),
        "union_regression_predictions": block("union_regression_predictions"),
        "pinned_by_replay": dict(att.pinned_by_replay) if att else {},
    }


def replay_cell(c: dict) -> str:
    """The audit table's cell: each at-risk task, what happened, and the first step it alters."""
    r = c.get("replay")
    if r is None:
        return "-"
    if not r.get("replayable"):
        return "not replayable"
    if not c["replay_at_risk"]:
        return "none"
    first = r.get("first_steps") or {}
    return "\n".join(f"{t}: {o}" + (f"\n  {first[t]}" if t in first else "") for t, o in c["replay_at_risk"].items())


def extra_rows(foresight: dict | None, pooled: bool) -> list[tuple[str, dict]]:
    """The replay and union rows of a prediction table (none when nothing was replayed)."""
    rows = []
    for key, name in FORESIGHT_ROWS:
        block = (foresight or {}).get(key)
        if block and (not pooled or block.get("iterations")):
            rows.append((name, block))
    return rows


def timeline_fields(c: ChangeEntry, verdict: Any, att: Attribution | None) -> dict:
    """The report's per-change foresight fields (html_template: "replay at risk")."""
    return {
        "replay": None if c.replay is None else c.replay.model_dump(),
        "replay_at_risk": list(c.replay_at_risk),
        "replay_regressions": list(getattr(verdict, "replay_regressions", []) or []),
        "regressed_after": list(att.regressed) if att else [],
    }


def table_rows(att: Attribution | None, fmt: Callable[[Any], str]) -> list[dict]:
    """The report's regression-foresight rows of one iteration: agent, replay, union (none without a replay)."""
    if att is None or att.union_regression_predictions is None:
        return []
    rows = []
    for who, s in (("agent", att.regression_predictions), ("replay", att.replay_regression_predictions),
                   ("agent ∪ replay", att.union_regression_predictions)):
        if s is None:
            continue
        rows.append({"who": who, "n_predicted": len(s.predicted), "n_hits": len(s.hits), "n_actual": len(s.actual),
                     **{k: fmt(getattr(s, k)) for k in ("precision", "recall", "random_precision", "random_recall")}})
    return rows
