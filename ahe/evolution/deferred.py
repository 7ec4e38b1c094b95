"""Deferred verdicts of the noise policy (docs/decisions.md, "Deferred verdicts").

Most wrong decisions of a verdict that must be given at once are beneficial changes rolled
back for lack of evidence: a gain of 0.4 on a flaky task cannot be shown with the few trials
one round buys. But every round re-runs every task, so the evidence about a change that stays
in the harness grows for free. A change whose evidence is *inconclusive but promising* — no
task moved down, and a task it is watched on (a predicted fix, or an unexplained rise when no
other change of its round stays) may still have risen by 0.3 or more — is therefore
**deferred**: it stays in the harness, its watched tasks do not pool history across it, and
each later attribution judges it again on all trials with it against all trials of the
harness it was made on:

- **keep** when a watched task rose decisively (P(up) ≥ 0.99) and P(net effect > 0) ≥ 0.9;
- **rollback** when a watched task fell decisively, when no watched task can still have risen
  by 0.3 (P < DROP_AT: its predicted fixes are shown not to have risen), when it has been
  deferred MAX_DEFER times, or at the run's final evaluation (no later round to judge it);
- **deferred** again otherwise, with its evidence and confidence stated.

Everything is read back from attribution.json files (`track_deferred` during the replay), so a
resumed run judges exactly the same changes with exactly the same evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ahe.evolution.evidence import Counts, Ledger, prob_greater
from ahe.run_folder import ChangeVerdict, WatchEvidence

MAX_DEFER = 3  # attributions that may defer one change; the next one decides
PROMISE = 0.2  # P(a watched task rose by ≥ 0.3) needed to defer rather than roll back
DROP_AT = 0.05  # below this on every watched task, a deferred change is rolled back early
RISE = 0.3  # the rise a watched task is tested for (the policy's hinge rate)
MIN_SIDE = 4  # trials on each side before a watched task can decide a deferred change
RESERVE = 0.1  # of the round's re-evaluation budget, left to H_best by the deferred changes' trials


@dataclass
class Pending:
    """A change whose latest verdict is `deferred`."""

    key: str
    verdict: ChangeVerdict  # the latest (deferred) verdict
    base: frozenset[str]  # the harness state it was made on
    seen: frozenset[str]  # the state its first judgement evaluated: those trials chose it, so they do not judge it
    since: int  # the attribution that first deferred it
    iteration: int  # the iteration that made it


def track_deferred(pending: dict[str, Pending], key: str, v: ChangeVerdict, base: frozenset[str],
                   seen: frozenset[str], r: int) -> None:
    """Replay: remember an open deferred verdict (first base kept), forget a resolved one."""
    if v.verdict != "deferred":
        pending.pop(key, None)
        return
    old = pending.get(key)
    made = v.change_iteration if v.change_iteration is not None else r - 1
    pending[key] = Pending(key, v, old.base if old else base, old.seen if old else seen, old.since if old else r, made)


def share_watch(ledger: Ledger, round_verdicts: list[tuple[str, ChangeVerdict]]) -> None:
    """A deferred change's watched tasks count as touched by every other change of its round:
    they could not be told apart then, so trials on harnesses that differ from it by a sibling
    (kept or reverted) are not evidence about it — else a sibling's gain is credited to it."""
    watched = {t for _, v in round_verdicts if v.verdict == "deferred" for t in v.watch_tasks}
    if not watched:
        return
    for key, v in round_verdicts:
        others = {t for _, w in round_verdicts if w is not v and w.verdict == "deferred" for t in w.watch_tasks}
        ledger.touched.setdefault(key, set()).update(others)


def p_rise(with_c: Counts, without: Counts, prior: Any, rng: np.random.Generator) -> float:
    """Posterior P(pass rate with the change − without it ≥ RISE)."""
    d = rng.beta(*with_c.post(prior), 4000) - rng.beta(*without.post(prior), 4000)
    return float((d >= RISE).mean())


def defer_or_rollback(rd: Any, v: ChangeVerdict, watch: list[str], rng: np.random.Generator, *, final: bool) -> ChangeVerdict:
    """A first verdict of "no evidence of benefit": deferred instead when a watched task is promising."""
    if final or v.verdict != "rollback" or not watch:
        return v
    rises = {t: p_rise(rd.after_counts(t), rd.before_counts(t), rd.prior, rng) for t in watch}
    promising = sorted(t for t, p in rises.items() if p >= PROMISE and rd.p_up(t) >= 0.5)
    if not promising:
        return v
    best = max(rises.values())
    return v.model_copy(update={
        "verdict": "deferred", "deferred_rounds": 1, "watch_tasks": sorted(watch), "confidence": round(best, 4),
        "reason": (f"no task moved decisively yet, but {', '.join(promising)} may have risen by ≥ {RISE} "
                   f"(P = {best:.2f}): deferred, stays in the harness and is judged again as trials accumulate "
                   f"(at most {MAX_DEFER} rounds)")})


def without_tag(rd: Any, p: Pending) -> str:
    """The tag of this round's base with the change undone."""
    return f"{rd.btag}-without-{p.iteration:03d}-{p.verdict.change_id}"


def sides(rd: Any, p: Pending, ledger: Ledger, t: str) -> tuple[Counts, Counts]:
    """Task t on this round's base (which carries the change) against the same harness without it.

    The ledger pools each side's history (trials on harnesses that differ only by changes judged
    not to touch t), so both sides agree on every other change that may move t. The trials of
    the round that first deferred the change are left out of its side: they chose it."""
    ev = rd.ev
    with_c = ledger.pooled(t, rd.before) + (ev.have(t, rd.btag) if ev else Counts())
    if ledger.compatible(t, p.seen, rd.before):  # leave out what the deferring round saw
        chose = rd.rp.rounds.get(p.since, {}).get(t, Counts())
        with_c = Counts(with_c.s - chose.s, with_c.n - chose.n)
    without = ledger.pooled(t, rd.before - {p.key}) + (ev.have(t, without_tag(rd, p)) if ev else Counts())
    return with_c, without


async def gather(rd: Any, pending: list[Pending], ledger: Ledger, repo: Any, *, decisive: float, per_side: int) -> None:
    """Re-evaluation trials for open deferred changes: a trial at a time per undecided watched task,
    on the side with fewer trials (this round's base, or it without the change: a tag built with git
    plumbing), closest to a decision first, out of what the round's budget has left (RESERVE kept for H_best)."""
    from ahe.evolution.reeval import tag_commit, without_change

    ev = rd.ev
    reserve = int(ev.budget * RESERVE)
    while ev.left > reserve:
        reqs: list[tuple[float, str, str, int]] = []
        for p in pending:
            wtag = without_tag(rd, p)
            for t in p.verdict.watch_tasks:
                with_c, without = sides(rd, p, ledger, t)
                pu = prob_greater(with_c, without, rd.prior)
                late = 1 - (1 - decisive) / MAX_DEFER
                if (pu >= late or pu <= 1 - late) and min(with_c.n, without.n) >= MIN_SIDE:
                    continue
                order = [rd.btag, wtag] if with_c.n <= without.n else [wtag, rd.btag]
                side = next((tag for tag in order if ev.have(t, tag).n < per_side), None)
                if side is None or any(r[1:3] == (t, side) for r in reqs):
                    continue
                if side == wtag and tag_commit(repo, wtag) is None:
                    without_change(repo, tag_commit(repo, rd.btag), p.verdict.commit, wtag)
                rd.extra_states[wtag] = rd.before - {p.key}
                reqs.append((abs(pu - 0.5), t, side, ev.have(t, side).n + 1))
        if not reqs:
            return
        reqs.sort(key=lambda r: -r[0])
        await ev.run([(t, side, n) for _, t, side, n in reqs[: max(1, ev.left - reserve)]])


def rejudge(rd: Any, p: Pending, ledger: Ledger, rng: np.random.Generator, *, final: bool,
            decisive: float, keep_at: float) -> ChangeVerdict:
    """Judge an open deferred change again on everything with it against everything without it."""
    v = p.verdict
    rows: list[WatchEvidence] = []
    used: dict[str, tuple[Counts, Counts]] = {}
    for t in v.watch_tasks:
        with_c, without = sides(rd, p, ledger, t)
        pu = prob_greater(with_c, without, rd.prior)
        rows.append(WatchEvidence(task=t, with_change=(with_c.s, with_c.n), without=(without.s, without.n), p_up=round(pu, 4)))
        used[t] = (with_c, without)
    # it is looked at up to MAX_DEFER times: each look gets an equal share of the error the policy allows once
    late = 1 - (1 - decisive) / MAX_DEFER
    ok = {t for t, (w, wo) in used.items() if min(w.n, wo.n) >= MIN_SIDE}
    ups = sorted(t for t, r in zip(v.watch_tasks, rows) if t in ok and r.p_up >= late)
    downs = sorted(t for t, r in zip(v.watch_tasks, rows) if t in ok and r.p_up <= 1 - late)
    net = np.zeros(4000)
    for t in ups + downs:
        w, wo = used[t]
        net += rng.beta(*w.post(rd.prior), 4000) - rng.beta(*wo.post(rd.prior), 4000)
    p_pos = float((net > 0).mean()) if ups or downs else 0.0
    rises = {t: p_rise(*used[t], rd.prior, rng) for t in v.watch_tasks}
    rounds = v.deferred_rounds
    seen = f"after {rounds} deferred round{'s' if rounds != 1 else ''}"
    if ups and p_pos >= keep_at:
        verdict, conf = "keep", p_pos
        reason = f"{seen}: moved up {', '.join(ups)}" + (f", down {', '.join(downs)}" if downs else "") + f"; P(net effect > 0) = {p_pos:.3f}"
    elif downs:
        verdict, conf = "rollback", 1 - p_pos
        reason = f"{seen}: moved down {', '.join(downs)}; P(net effect > 0) = {p_pos:.3f}"
    else:
        best = max(rises.values(), default=0.0)
        why = ("the final evaluation: no later round to judge it" if final else
               f"deferred {rounds} times, the most allowed" if rounds >= MAX_DEFER else
               f"no watched task can still have risen by {RISE} (P ≤ {best:.2f})" if best < DROP_AT else "")
        if why:
            verdict, conf = "rollback", 1 - best
            reason = f"{seen}: no evidence of benefit — {why} (harness bloat)"
        else:
            verdict, conf, rounds = "deferred", best, rounds + 1
            reason = (f"{seen}: still inconclusive (best watched task P(rise ≥ {RISE}) = {best:.2f}); "
                      f"deferred again, judged next round")
    return v.model_copy(update={
        "verdict": verdict, "reason": reason, "confidence": round(conf, 4), "change_iteration": p.iteration,
        "deferred_rounds": rounds, "watch_evidence": rows,
        "fixes_improved": [t for t in v.predicted_fixes if t in ups],
        "fixes_not_improved": [t for t in v.predicted_fixes if t not in ups],
        "regressions_happened": [t for t in v.predicted_regressions if t in downs],
        "unpredicted_regressions": [t for t in downs if t not in v.predicted_regressions],
        "touched_tasks": ups + downs})
