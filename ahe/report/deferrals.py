"""Deferred verdicts in the audit and report: a change judged again in later rounds.

Under the noise policy a change can be `deferred` (docs/decisions.md): it stays in the harness
and later attributions judge it again (`Attribution.rejudged`). Under expected-value a change kept
before the last look is judged again every later round and rolled back when it no longer clears
the bar (also `Attribution.rejudged`). Readers show the change's verdict as its latest one, with
every step, its evidence and who reverted it.
"""

from __future__ import annotations

from typing import Any

from ahe.run_folder import ChangeVerdict, RollbackRecord, RunFolder


def deferral_history(run: RunFolder) -> dict[tuple[int, str], list[dict]]:
    """(iteration that made the change, change id) -> its re-judgements, oldest first, each with
    the iteration that judged it and the rollback record when that one reverted it."""
    out: dict[tuple[int, str], list[dict]] = {}
    for it in run.iterations():
        att = run.iteration(it).attribution()
        if att is None or not att.rejudged:
            continue
        rb = run.iteration(it).rollback()
        for v in att.rejudged:
            made = v.change_iteration if v.change_iteration is not None else it - 1
            rec = next((r for r in (rb.rolled_back if rb else [])
                        if r.change_id == v.change_id and r.change_iteration == made), None)
            out.setdefault((made, v.change_id), []).append({"judged_by": it, "verdict": v, "rollback": rec})
    return out


def latest(first: ChangeVerdict | None, first_rb: RollbackRecord | None, steps: list[dict]) -> tuple[ChangeVerdict | None, RollbackRecord | None]:
    """The change's standing verdict and the rollback that reverted it (if any): its latest judgement —
    a later round's when it was deferred, or kept and judged again (expected-value's re-judgement)."""
    if first is None or not steps:
        return first, first_rb
    return steps[-1]["verdict"], steps[-1]["rollback"]


def steps_json(steps: list[dict]) -> list[dict[str, Any]]:
    return [{"judged_by": s["judged_by"], "verdict": s["verdict"].verdict, "reason": s["verdict"].reason,
             "confidence": s["verdict"].confidence, "deferred_rounds": s["verdict"].deferred_rounds,
             "watch_evidence": [w.model_dump() for w in s["verdict"].watch_evidence],
             "rollback_commit": s["rollback"].revert_commit if s["rollback"] else None} for s in steps]


def deferral_table(it: dict) -> Any:
    """Rich table: the deferred changes of an audit iteration and each later judgement of them."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=f"Deferred verdicts and re-judgements of iteration {it['iteration']}'s changes (judged again as trials accumulate)")
    for col in ("change", "judged by", "verdict", "watched task: with s/n vs without s/n, P(up)", "reason"):
        t.add_column(col, overflow="fold")
    for c in it["changes"]:
        for s in c.get("deferred_steps") or []:
            ev = "\n".join(f"{w['task']}: {w['with_change'][0]}/{w['with_change'][1]} vs {w['without'][0]}/{w['without'][1]}, "
                           f"{w['p_up']:.3f}" for w in s["watch_evidence"])
            conf = f" ({s['confidence']:.2f})" if s["confidence"] is not None else ""
            t.add_row(Text(c["id"]), f"iteration {s['judged_by']}", s["verdict"] + conf, Text(ev or "-"), Text(s["reason"]))
    return t
