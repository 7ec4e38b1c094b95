"""The noise-aware verdict policy (`strictness: noise`, DESIGN.md §11.1, docs/decisions.md).

A change is judged by evidence, not by a δ threshold on two trials:

1. Per task, the pass rate on the round's base harness (with every earlier trial that is
   evidence about it, see `ahe.evolution.evidence.Ledger`) against its head harness;
   `p_up` = posterior P(after > before). A task *moved* when p_up ≥ 0.99 (up) or ≤ 0.01 (down).
2. Tasks that hinge — a predicted fix or risk, or a rate that moved ≥ 0.3 without being
   decisive — get targeted re-evaluation trials on both tags, a few at a time, until decisive
   or the budget (a share of one round) is spent.
3. A moved task is pinned on a change by evidence: the only change of the round; else "head
   without c" is re-evaluated on that task — c caused it when the task falls back to its
   base level without c, and is cleared when it stays ("an earlier change did it" keeps a
   share of the prior, so the last uncleared change is never blamed by elimination alone).
4. A change is kept when it moved some task up and P(its net effect > 0) ≥ 0.9; rolled back
   when a task it moved fell, or when it shows no evidence of benefit and none is in sight;
   deferred when a watched task may still have risen (`ahe.evolution.deferred`: it stays and
   is judged again in later rounds). The burden of proof is on the change; the confidence
   of each verdict is stated.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ahe.evolution.deferred import Pending, defer_or_rollback, gather, rejudge, share_watch, track_deferred
from ahe.evolution.evidence import Counts, Ledger, Prior, fit_prior, prob_between, prob_greater
from ahe.evolution.reeval import Reevaluator, make_reevaluator, tag_commit, without_change
from ahe.evolution.scoring import score
from ahe.harness.manifest import ChangeEntry
from ahe.rollout.models import RunResults
from ahe.run_folder import (Attribution, ChangeVerdict, ReevalHarness, ReevalSummary, RunFolder, TaskEvidenceRecord,
                            read_model, read_unchanged)

DECISIVE = 0.99  # p_up at or beyond this (or 1 − this) is a movement
HINGE_RATE = 0.3  # a raw rate difference that earns re-evaluation
KEEP_AT = 0.9  # P(net effect > 0) needed to keep
SCREEN_SHARE = 0.6  # of the budget, at most this much on screening; the rest pins movements on changes
MAX_EXTRA = 10  # re-evaluation trials per task and side
FLAT_EXTRA = 4  # a predicted task that does not move gets this many before it is let go
NAMED_ODDS = 3.0  # prior odds that a change which predicted a movement caused it, against one that did not
MAX_LOO = 6  # trials of "head without c" on one task
EARLIER_ODDS = 1.0  # prior weight of "an earlier change did it" against one unpredicting change of the round
CONFIRM = 2  # a movement seen in the round's own trials must survive this many fresh ones on the head


EARLIER = "no change of this round explains it"
EVIDENCE_POLICIES = {"noise", "expected-value"}  # their verdicts name the tasks each change touched


def change_key(iteration: int, change_id: str) -> str:
    return f"{iteration:03d}/{change_id}"


@dataclass
class Replay:
    """The run's history replayed from its files: states evaluated, evidence, judged changes."""

    ledger: Ledger = field(default_factory=Ledger)
    states: dict[int, frozenset[str]] = field(default_factory=dict)  # round -> state it evaluated
    commits: dict[int, str] = field(default_factory=dict)  # round -> commit it evaluated
    now: frozenset[str] = frozenset()  # the workspace's state where the replay stopped
    tasks: list[str] = field(default_factory=list)
    deferred: dict[str, "Pending"] = field(default_factory=dict)  # change key -> its deferred verdict, still open
    rounds: dict[int, dict[str, Counts]] = field(default_factory=dict)  # round -> task -> what it saw on its head


def _manifest(run: RunFolder, it: int) -> list[ChangeEntry]:
    manifest, partial = run.iteration(it).manifest()
    return [] if manifest is None or partial else manifest.accepted()


def replay(run: RunFolder, it: int, *, complete: bool, best_of_it: bool = True) -> Replay:
    """History up to round `it`'s rollout; with `complete`, also its attribution, re-evaluation and rollback
    (and, unless `best_of_it` is False, the trials H_best's choice after round `it` re-ran)."""
    rp = Replay()
    state: frozenset[str] = frozenset()
    for r in range(1, it + 1):
        rp.states[r] = state
        folder = run.iteration(r)
        res = read_unchanged(folder.results_json, RunResults)  # read only; every round replays the earlier ones
        if res is None:
            raise RuntimeError(f"{folder.results_json}: missing or unreadable")
        ref = folder.harness()
        rp.commits[r] = ref.commit if ref else ""
        for task, ts in res.tasks.items():
            rp.ledger.add(task, state, ts.passed, ts.trials)
            rp.rounds.setdefault(r, {})[task] = Counts(ts.passed, ts.trials)
        rp.tasks = sorted(res.tasks)
        if r == it and not complete:
            break
        att = folder.attribution()
        if att:
            base = state - {change_key(r - 1, c.id) for c in _manifest(run, r - 1)}
            for v in att.rejudged + att.changes:
                key = change_key(v.change_iteration if v.change_iteration is not None else r - 1, v.change_id)
                rp.ledger.judged.add(key)
                moved = v.touched_tasks if att.strictness in EVIDENCE_POLICIES else att.improved + att.regressed
                rp.ledger.touched[key] = set(moved) | (set(v.watch_tasks) if v.verdict == "deferred" else set())
                track_deferred(rp.deferred, key, v, base, state, r)
            share_watch(rp.ledger, [(change_key(r - 1, v.change_id), v) for v in att.changes])
            for e in att.evidence:  # a movement no change of its round explains: an earlier
                if e.movement != "none" and not e.attributed_to:  # change did it, so the task's
                    for key in rp.states[r]:  # history before this round no longer pools
                        rp.ledger.touched.setdefault(key, set()).add(e.task)
        _add_reevals(run, r, rp, best=best_of_it or r < it)
        rb = folder.rollback()
        gone = {change_key(x.change_iteration if x.change_iteration is not None else r - 1, x.change_id)
                for x in (rb.rolled_back if rb else []) if x.revert_commit}
        state = state - gone
        if r == it:
            break
        state = state | {change_key(r, c.id) for c in _manifest(run, r)}
    rp.now = state
    return rp


_OUTCOMES: dict[str, tuple[int, bool]] = {}  # result.json -> (mtime_ns, passed): a finished trial is read once


def _outcome(trial_dir: Path | str) -> bool | None:
    """A finished re-evaluation trial's outcome (None: absent, unreadable or an infrastructure error)."""
    from ahe.rollout.trial import RESULT_FILE, load_result

    path = os.path.join(trial_dir, RESULT_FILE)
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        return None
    hit = _OUTCOMES.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    res = load_result(Path(trial_dir))
    if res is None or res.infra:
        return None
    if len(_OUTCOMES) > 200_000:
        _OUTCOMES.clear()
    _OUTCOMES[path] = (stamp, res.passed)
    return res.passed


def _entries(folder: str) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except OSError:
        return []


def _add_reevals(run: RunFolder, r: int, rp: Replay, *, best: bool = True) -> None:
    folder = run.iteration(r)
    info = read_model(folder.reeval_json, ReevalSummary)
    harnesses = dict(info.harnesses) if info else {}
    if info and info.best and best:
        harnesses.update(info.best.harnesses)
    if not harnesses:
        return
    # reeval/<task>/<tag>/trial-<n>/: each folder listed once, in the order glob("*/<tag>"), glob("trial-*") would
    root = str(folder.reeval)
    tasks = [(e.name, e.path, {c.name for c in _entries(e.path)}) for e in _entries(root) if e.is_dir()]
    for tag, h in harnesses.items():
        for task, task_path, tags in tasks:
            tag_dir = os.path.join(task_path, tag)
            if tag not in tags or not os.path.exists(tag_dir):
                continue
            got = [x for x in (_outcome(e.path) for e in _entries(tag_dir) if e.name.startswith("trial-")) if x is not None]
            rp.ledger.add(task, frozenset(h.state), sum(got), len(got))
            if tag == f"iter-{r - 1:03d}":  # the round's own head: part of what the round saw
                rnd = rp.rounds.setdefault(r, {})
                rnd[task] = rnd.get(task, Counts()) + Counts(sum(got), len(got))


@dataclass
class _Round:
    it: int
    changes: list[ChangeEntry]
    keys: dict[str, str]
    before: frozenset[str]
    after: frozenset[str]
    rp: Replay
    ev: Reevaluator | None
    btag: str
    atag: str
    prior: Prior = field(default_factory=Prior)
    extra_states: dict[str, frozenset[str]] = field(default_factory=dict)  # other tags re-run: their states
    _pooled: dict[str, Counts] = field(default_factory=dict)

    def before_counts(self, task: str) -> Counts:
        if task not in self._pooled:
            self._pooled[task] = self.rp.ledger.pooled(task, self.before)
        return self._pooled[task] + (self.ev.have(task, self.btag) if self.ev else Counts())

    def after_counts(self, task: str) -> Counts:
        return self.rp.ledger.exact(task, self.after) + (self.ev.have(task, self.atag) if self.ev else Counts())

    def p_up(self, task: str) -> float:
        return prob_greater(self.after_counts(task), self.before_counts(task), self.prior)

    def movement(self, task: str) -> str:
        """up/down when decisive and (with re-evaluation) confirmed by fresh trials on the head."""
        mv = _movement(self.p_up(task))
        if mv != "none" and self.ev is not None and self.ev.have(task, self.atag).n < CONFIRM:
            return "none"
        return mv


def _movement(p: float) -> str:
    return "up" if p >= DECISIVE else "down" if p <= 1 - DECISIVE else "none"


def verdict_from_movement(change: ChangeEntry, keep: bool, reason: str, ups: list[str], downs: list[str]) -> ChangeVerdict:
    """A verdict whose predictions are checked against the tasks that moved up and down."""
    return ChangeVerdict(
        change_id=change.id, commit=change.commit, component=change.component, verdict="keep" if keep else "rollback",
        reason=reason,
        predicted_fixes=list(change.predicted_fixes), fixes_improved=[t for t in change.predicted_fixes if t in ups],
        fixes_not_improved=[t for t in change.predicted_fixes if t not in ups],
        predicted_regressions=list(change.predicted_regressions),
        regressions_happened=[t for t in change.predicted_regressions if t in downs],
        unpredicted_regressions=[t for t in downs if t not in change.predicted_regressions], touched_tasks=ups + downs)


def open_round(run: RunFolder, it: int, repo, reevaluator: Reevaluator | None) -> "_Round":
    """The round that judges iteration it−1's changes: their evidence replayed from the run,
    the base and the harness as tags (base-NNN, iter-NNN), and the prior fitted on the base."""
    changes = _manifest(run, it - 1)
    rp = replay(run, it, complete=False)
    keys = {c.id: change_key(it - 1, c.id) for c in changes}
    after = rp.states[it]
    before = after - set(keys.values())
    manifest, _ = run.iteration(it - 1).manifest()
    base_commit = manifest.base_commit if manifest is not None else rp.commits[it]
    btag, atag = f"base-{it - 1:03d}", f"iter-{it - 1:03d}"
    repo.tag(btag, base_commit)
    rd = _Round(it, changes, keys, before, after, rp, reevaluator, btag, atag)
    rd.prior = fit_prior([rp.ledger.pooled(t, before) for t in rp.tasks])
    return rd


async def attribute_noise(run: RunFolder, it: int, repo, *, reevaluator: Reevaluator | None, k: int,
                          final: bool = False) -> Attribution:
    """Judge the accepted changes of iteration it−1 with the evidence (and re-evaluation trials)."""
    rd = open_round(run, it, repo, reevaluator)
    changes, rp = rd.changes, rd.rp
    predicted = {t for c in changes for t in c.predicted_fixes + c.predicted_regressions}
    if reevaluator is not None and changes:
        await _screen(rd, predicted, k)
    movers = {t: rd.movement(t) for t in rp.tasks}
    movers = {t: m for t, m in movers.items() if m != "none"}
    attributed, how = await _pin(rd, movers, repo) if changes else ({}, {})
    rng = np.random.default_rng(rd.it)
    unpinned = sorted(t for t, m in movers.items() if m == "up" and not attributed.get(t) and not how.get(t, "").startswith(EARLIER))
    verdicts = _defer(rd, _verdicts(rd, movers, attributed, rng), movers, predicted, unpinned, rng, final=final)
    rejudged = await _rejudge_pending(rd, verdicts, rng, repo, final=final)
    att = _attribution(rd, movers, attributed, how, predicted, verdicts, run)
    att.rejudged = rejudged
    return att


async def _screen(rd: _Round, predicted: set[str], k: int) -> None:
    ev = rd.ev
    assert ev is not None
    cap = int(ev.budget * SCREEN_SHARE)
    while ev.spent < cap:
        reqs: list[tuple[float, str, str, int]] = []
        for t in rd.rp.tasks:
            b, a = rd.before_counts(t), rd.after_counts(t)
            p = prob_greater(a, b, rd.prior)
            extra = ev.have(t, rd.atag).n
            if _movement(p) != "none":
                if extra < CONFIRM:  # confirm it first: two trials can be a fluke
                    reqs.append((2.0, t, rd.atag, extra + 1))
                continue
            rate_gap = abs(a.s / max(1, a.n) - b.s / max(1, b.n))
            hinge = rate_gap >= HINGE_RATE
            if not (hinge and extra < MAX_EXTRA) and not (t in predicted and extra < FLAT_EXTRA):
                continue
            side = rd.atag if a.n <= b.n else rd.btag
            reqs.append((abs(p - 0.5), t, side, ev.have(t, side).n + 1))
        if not reqs:
            return
        reqs.sort(key=lambda r: -r[0])  # closest to a decision first
        await ev.run([(t, side, n) for _, t, side, n in reqs[: max(1, cap - ev.spent)]])


async def _pin(rd: _Round, movers: dict[str, str], repo) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Which change moved each task (see the module docstring, point 3)."""
    attributed: dict[str, list[str]] = {}
    how: dict[str, str] = {}
    ids = [c.id for c in rd.changes]
    by_id = {c.id: c for c in rd.changes}
    for t, mv in sorted(movers.items()):
        if len(ids) == 1:
            attributed[t], how[t] = ids, "the only change of the round"
            continue
        named = [i for i in ids if t in (by_id[i].predicted_fixes if mv == "up" else by_id[i].predicted_regressions)]
        order = named + [i for i in ids if i not in named]
        cleared: list[str] = []
        found: str | None = None
        weight = {i: (NAMED_ODDS if i in named else 1.0) for i in ids}  # the manifest's prediction is prior evidence
        for cid in order:
            if rd.ev is None or rd.ev.left < 1:
                break
            tag = f"{rd.atag}-without-{cid}"
            if tag_commit(repo, tag) is None:
                without_change(repo, tag_commit(repo, rd.atag) or repo.head(), by_id[cid].commit, tag)
            while rd.ev.left >= 1:
                await rd.ev.run([(t, tag, rd.ev.have(t, tag).n + 1)])
                loo = rd.ev.have(t, tag)
                x = prob_between(loo, rd.before_counts(t), rd.after_counts(t), rd.prior)
                # an earlier change (kept or deferred) may have moved it too: it keeps a share, so
                # clearing every other change of the round never pins the movement on the last one
                p0 = weight[cid] / (EARLIER_ODDS + sum(weight[i] for i in ids if i not in cleared))
                post = p0 * x / (p0 * x + (1 - p0) * (1 - x)) if 0 < x < 1 else x
                if post >= 0.95:
                    found, how[t] = cid, f"without {cid} the task fell back to its base level ({loo.s}/{loo.n}; P = {post:.2f})"
                    break
                if post <= 0.05 or loo.n >= MAX_LOO:
                    if post <= 0.05:
                        cleared.append(cid)
                    break
            if found:
                break
        if found:
            attributed[t] = [found]
        elif len(cleared) == len(order):
            attributed[t], how[t] = [], EARLIER + " (without each, the task stayed): an earlier change did"
        else:
            attributed[t] = [i for i in named if i not in cleared]
            how[t] = ("the evidence ran out: pinned on " + ", ".join(attributed[t]) + ", which predicted it") if attributed[t] \
                else "the evidence ran out before a change could be pinned; none predicted it"
    return attributed, how


def _verdicts(rd: _Round, movers: dict[str, str], attributed: dict[str, list[str]],
              rng: np.random.Generator) -> list[ChangeVerdict]:
    verdicts = []
    for c in rd.changes:
        ups = sorted(t for t, m in movers.items() if m == "up" and c.id in attributed.get(t, []))
        downs = sorted(t for t, m in movers.items() if m == "down" and c.id in attributed.get(t, []))
        touched = ups + downs
        if touched:
            net = np.zeros(4000)
            for t in touched:
                a, b = rd.after_counts(t), rd.before_counts(t)
                net += rng.beta(*a.post(rd.prior), 4000) - rng.beta(*b.post(rd.prior), 4000)
            p_pos = float((net > 0).mean())
        else:
            p_pos = 0.0
        keep = bool(ups) and p_pos >= KEEP_AT
        if keep:
            reason = f"moved up {', '.join(ups)}" + (f", down {', '.join(downs)}" if downs else "") + f"; P(net effect > 0) = {p_pos:.3f}"
            conf = p_pos
        elif touched:
            reason = (f"moved down {', '.join(downs)}" if downs else "") + (f"; up {', '.join(ups)}" if ups else "") + f"; P(net effect > 0) = {p_pos:.3f}"
            conf = 1 - p_pos
        else:
            tasks = c.predicted_fixes or []
            conf = min((1 - rd.p_up(t) for t in tasks), default=0.5)
            conf = max(conf, min(_no_big_rise(rd, t, rng) for t in tasks) if tasks else 0.5)
            reason = "no task moved decisively that it could have touched: no evidence of benefit (harness bloat)"
        verdicts.append(ChangeVerdict(
            change_id=c.id, commit=c.commit, component=c.component, verdict="keep" if keep else "rollback",
            reason=reason.strip("; "), predicted_fixes=list(c.predicted_fixes),
            fixes_improved=[t for t in c.predicted_fixes if t in ups],
            fixes_not_improved=[t for t in c.predicted_fixes if t not in ups],
            predicted_regressions=list(c.predicted_regressions),
            regressions_happened=[t for t in c.predicted_regressions if t in downs],
            unpredicted_regressions=[t for t in downs if t not in c.predicted_regressions],
            confidence=round(conf, 4), touched_tasks=touched))
    return verdicts


def _defer(rd: _Round, verdicts: list[ChangeVerdict], movers: dict[str, str], predicted: set[str], unpinned: list[str],
           rng: np.random.Generator, *, final: bool) -> list[ChangeVerdict]:
    """Turn "no evidence of benefit" into a deferred verdict where the evidence is still promising
    (ahe.evolution.deferred). A change is watched on its predicted fixes, on rises the budget could
    not pin on one change of the round, and on rises nobody predicted when it is the only change
    of its round that may stay in the harness."""
    open_ = [v for v in verdicts if v.verdict == "rollback" and not v.touched_tasks]
    staying = [v for v in verdicts if v.verdict == "keep"] + open_
    unexplained = sorted(t for t in rd.rp.tasks if t not in movers and t not in predicted and rd.p_up(t) >= 0.9)
    out = []
    for v in verdicts:
        if v in open_:
            watch = sorted(set(v.predicted_fixes) | set(unpinned) | set(unexplained if len(staying) == 1 else []))
            v = defer_or_rollback(rd, v, watch, rng, final=final)
        out.append(v)
    return out


async def _rejudge_pending(rd: _Round, verdicts: list[ChangeVerdict], rng: np.random.Generator, repo, *,
                           final: bool) -> list[ChangeVerdict]:
    """Judge every open deferred change of earlier rounds again, with this round's trials pooled in
    where this round's own changes were found not to touch the task, after re-evaluation trials of
    its watched tasks with it (this round's base) and without it (the harness it was made on)."""
    pending = [p for _, p in sorted(rd.rp.deferred.items()) if p.key in rd.before]
    if not pending:
        return []
    led = Ledger(obs=rd.rp.ledger.obs, judged=set(rd.rp.ledger.judged),
                 touched={k: set(v) for k, v in rd.rp.ledger.touched.items()})
    for v in verdicts:
        key = rd.keys[v.change_id]
        led.judged.add(key)
        led.touched[key] = set(v.touched_tasks) | set(v.watch_tasks)
    share_watch(led, [(rd.keys[v.change_id], v) for v in verdicts])
    if rd.ev is not None:  # at the final evaluation too: its verdict is the last one
        await gather(rd, pending, led, repo, decisive=DECISIVE, per_side=MAX_EXTRA)
    return [rejudge(rd, p, led, rng, final=final, decisive=DECISIVE, keep_at=KEEP_AT) for p in pending]


def _no_big_rise(rd: _Round, t: str, rng: np.random.Generator) -> float:
    """P(the task's pass rate rose by less than 0.3): how sure "it did not fix this" is."""
    a, b = rd.after_counts(t), rd.before_counts(t)
    d = rng.beta(*a.post(rd.prior), 4000) - rng.beta(*b.post(rd.prior), 4000)
    return float((d < HINGE_RATE).mean())


def _attribution(rd: _Round, movers, attributed, how, predicted, verdicts, run: RunFolder) -> Attribution:
    before_res, after_res = run.iteration(rd.it - 1).results(), run.iteration(rd.it).results()
    assert before_res is not None and after_res is not None  # replay() read them already
    up = sorted(t for t, m in movers.items() if m == "up")
    down = sorted(t for t, m in movers.items() if m == "down")
    pred_fix = {t for c in rd.changes for t in c.predicted_fixes}
    pred_reg = {t for c in rd.changes for t in c.predicted_regressions}
    evidence = []
    ev = rd.ev
    for t in rd.rp.tasks:
        a, b = rd.after_counts(t), rd.before_counts(t)
        spent = ev.spent_on(t) if ev else 0
        if t not in movers and t not in predicted and not spent:
            continue
        hist = rd.rp.ledger.pooled(t, rd.before).n - rd.rp.ledger.exact(t, rd.before).n
        evidence.append(TaskEvidenceRecord(
            task=t, before=(b.s, b.n), after=(a.s, a.n), history_trials=hist, reeval_trials=spent,
            p_up=round(rd.p_up(t), 4), movement=movers.get(t, "none"), flaky=b.flaky or a.flaky,
            attributed_to=attributed.get(t, []), how=how.get(t, "")))
    n = len(rd.rp.tasks)
    reeval = None
    if ev is not None:
        reeval = ReevalSummary(
            budget=ev.budget, spent=ev.spent, run_now=ev.ran, tokens=ev.usage.total_tokens,
            cost_usd=round(ev.usage.cost_usd or 0.0, 6), prior=(round(rd.prior.a, 4), round(rd.prior.b, 4)),
            harnesses={tag: ReevalHarness(commit=c, state=sorted(_state_of(rd, tag))) for tag, c in ev.tags.items()})
    return Attribution(
        iteration=rd.it, delta=0.0, strictness="noise", n_tasks=n, improved=up, regressed=down,
        pass_rate_before={t: s.pass_rate for t, s in before_res.tasks.items() if s.trials},
        pass_rate_after={t: s.pass_rate for t, s in after_res.tasks.items() if s.trials},
        changes=verdicts, fix_predictions=score(pred_fix, set(up), n), regression_predictions=score(pred_reg, set(down), n),
        unpredicted_improvements=[t for t in up if t not in pred_fix], unpredicted_regressions=[t for t in down if t not in pred_reg],
        evidence=evidence, reeval=reeval)


def _state_of(rd: _Round, tag: str) -> frozenset[str]:
    if tag in rd.extra_states:
        return rd.extra_states[tag]
    if tag == rd.btag:
        return rd.before
    if tag == rd.atag:
        return rd.after
    cid = tag.rsplit("-without-", 1)[-1]
    return rd.after - {rd.keys.get(cid, "")}


class NoisePolicy:
    """`strictness: noise`. `judge_round` is what the loop calls; `judge` serves callers that
    only have one round's counts (no history, no re-evaluation)."""

    name = "noise"

    def judge(self, change: ChangeEntry, evidence: Any) -> ChangeVerdict:
        prior = fit_prior([Counts(e.before_passed or 0, e.before_trials or 0) for e in evidence.tasks.values()])
        ups, downs = [], []
        for t, e in evidence.tasks.items():
            if e.before_trials is None or e.after_trials is None:
                continue
            mv = _movement(prob_greater(Counts(e.after_passed or 0, e.after_trials), Counts(e.before_passed or 0, e.before_trials), prior))
            mine = len(evidence.changes) <= 1 or t in (change.predicted_fixes if mv == "up" else change.predicted_regressions)
            if mv != "none" and mine:
                (ups if mv == "up" else downs).append(t)
        keep = bool(ups) and len(ups) > len(downs)
        return verdict_from_movement(change, keep, (f"moved up {', '.join(ups)}" if ups else "no task moved decisively: no evidence of benefit")
                                     + (f"; down {', '.join(downs)}" if downs else "") + " (one round's counts only)", ups, downs)

    async def judge_round(self, ctx: Any, it: int) -> Attribution:
        """The whole round of iteration it−1's changes, with re-evaluation trials through ctx's executor."""
        from ahe.evolution.context import reeval_executor, rollout_config

        results = ctx.run.iteration(it).results()
        n_tasks = len(results.tasks) if results else 0
        final = ctx.cfg.evaluate_final and it > ctx.cfg.iterations
        with reeval_executor(ctx) as executor:
            ev = make_reevaluator(ctx.repo, ctx.run.iteration(it), rollout_config(ctx), executor,
                                  budget=int(ctx.cfg.attribution.reeval_share * n_tasks * ctx.cfg.k))
            return await attribute_noise(ctx.run, it, ctx.repo, reevaluator=ev, k=ctx.cfg.k, final=final)
