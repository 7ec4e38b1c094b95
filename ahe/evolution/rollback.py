"""Automatic rollback: revert exactly the commit of each change judged `rollback`."""

from __future__ import annotations

from ahe.run_folder.decisions import Attribution, RollbackRecord, RollbackReport
from ahe.harness.repo import HarnessRepo


def apply_rollbacks(repo: HarnessRepo, attribution: Attribution) -> RollbackReport:
    """Revert every `rollback` verdict, newest change first so reverts apply cleanly."""
    base = repo.head()
    records = []
    # a deferred change judged again (noise policy) is reverted like the round's own; it is older, so last
    targets = [v for v in attribution.rejudged + attribution.changes if v.verdict == "rollback" and v.commit]
    for v in reversed(targets):
        msg = f"rollback {v.change_id}: {v.reason}\n\nReverts {v.commit} (iteration {attribution.iteration} attribution)."
        try:
            out = repo.revert(v.commit, msg)  # type: ignore[arg-type]
            records.append(
                RollbackRecord(change_id=v.change_id, change_iteration=v.change_iteration, commit=v.commit, revert_commit=out.commit, method=out.method, files=out.files, reason=v.reason)  # type: ignore[arg-type]
            )
        except Exception as exc:  # recorded, never fatal: the next evolve agent sees it
            records.append(RollbackRecord(change_id=v.change_id, change_iteration=v.change_iteration, commit=v.commit,
                                          reason=v.reason, error=str(exc)))  # type: ignore[arg-type]
    records.reverse()
    return RollbackReport(iteration=attribution.iteration, base_head=base, head=repo.head(), rolled_back=records)
