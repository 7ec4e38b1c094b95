"""The expected-value verdict policy (`strictness: expected-value`, docs/decisions.md).

What the user loses is the gain of a beneficial change wrongly dropped and the loss of a
harmful change wrongly kept; a neutral change kept costs clutter, not pass@1. So each change
is kept when its **posterior expected effect on pass@1** exceeds a stated clutter cost
(`CLUTTER` of one task's pass rate, divided by the number of tasks) — not when an effect is
significant at 0.99. At the last look that is P(effect > cost) ≥ 0.5; before it the bar is
lower (`OPEN_BAR`), because a change kept is judged again next round on evidence that grows
for free, while a change dropped is never seen again.

1. Per task, a spike-and-slab model: the round's changes moved the task's pass rate (slab:
   before and after independent, Beta prior fitted to the run's tasks) or did not (spike: one
   shared rate). P(moved | trials) is the prior odds times the Bayes factor of the two
   marginal likelihoods; E[effect] = P(moved) · E[p_after − p_before | moved]. The before side
   pools the run's history (`Ledger`), so 0/14 before and 2/2 now is strong evidence.
2. The prior P(moved): a task a manifest named (a predicted fix or risk, or a task its replay
   put at risk, `replay_at_risk`) moves with the stated precision, scaled per component class
   by the run's own ratio (learned by expectation-maximisation, `fit_rates`); a change may move
   UNNAMED_MOVES tasks it did not name. The level is stated, wide on purpose (`fit_rates`).
3. A task's effect is shared among the round's changes by the same prior (a change that named
   the task is `precision / base rate` times likelier to have caused it; for a task nobody
   named, "an earlier change did it" keeps one share); a task that moved under several changes
   is pinned by re-running "head without c" (as `noise` does).
4. Tasks whose raw rate moved by 0.3 or more get a few fresh trials on the head first (a
   rise nobody named starts from a small prior). Then re-evaluation trials go where the **value of information** is highest: the change whose
   decision has the largest expected loss (σ·(φ(z) − |z|·(1 − Φ(|z|))), z = (μ − cost)/σ),
   on the tasks that carry most of its variance, until no decision is worth a trial or the
   budget (minus H_best's reserved share) is spent.
5. Earlier keeps are judged again every round on everything with them against everything
   without them, by the same bar; one that no longer clears it is rolled back.
6. Given a move, a task's effect is shrunk towards the run's learned mean effect on such tasks
   (predicted fixes that moved rose by this much on average; predicted risks fell by that much),
   so a change whose kind has helped in this run gets the benefit of its own track record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from scipy.special import betaln

from ahe.evolution.evidence import Counts, Ledger, Prior, fit_prior
from ahe.evolution.noise import _attribution, _manifest, _pin, _Round, change_key, open_round, verdict_from_movement
from ahe.evolution.reeval import Reevaluator, make_reevaluator
from ahe.harness.manifest import ChangeEntry
from ahe.run_folder import Attribution, ChangeVerdict, RunFolder, WatchEvidence

CLUTTER = 0.15  # a neutral change kept costs this share of one task's pass rate (÷ tasks: pass@1 units)
RESERVE = 0.25  # of the round's re-evaluation budget, kept for H_best
MIN_LOSS = 0.003  # stop re-evaluating when no decision's expected loss exceeds this share of one task
PIN_AT = 0.8  # P(moved) above which a task shared by several changes is pinned with "without c" trials
TOUCH_AT = 0.5  # a change's share of P(moved) at which the task counts as touched by it (history stops pooling)
PRIOR_PRECISION = (2.0, 2.0)  # Beta prior of "a named task moves" (mean 1/2: wider than the paper's 1/3, see fit_rates)
UNNAMED_MOVES = 3.0  # prior: a change may move about this many tasks its manifest did not name
HINGE = 0.3  # a raw rate gap that earns screening trials before the value-of-information search
SCREEN_SHARE = 0.3  # of the budget, at most this much on screening
EFFECT_SD = 0.3  # prior spread of a moved task's effect around the run's learned mean effect
EFFECT_PSEUDO = 4.0  # pseudo-observations of a zero effect the learned mean starts from
BATCH = 4  # tasks re-run per value-of-information step
PIN_SHARE = 0.4  # of the budget, at most this much on "head without c" trials
COMPONENT_PSEUDO = 4.0  # a component class's named-task precision is shrunk towards the overall one by this many tasks
EARLIER = 1.0  # weight of "an earlier change did it" for a task no change of the round named
OPEN_BAR = 0.25  # keep while P(effect > cost) is at least this and a later round will judge it again


def keep_bar(final: bool) -> float:
    """The posterior probability that a change beats the clutter cost needed to keep it. At the last
    look it is 0.5 (the expected-value rule); before it lower: a change kept is judged again every
    round on evidence that grows for free, while one dropped is never seen again."""
    return 0.5 if final else OPEN_BAR


def p_moved(before: Counts, after: Counts, prior: Prior, pi: float) -> float:
    """Posterior P(the pass rate differs between the two sides) under the spike-and-slab model."""
    a, b = prior.a, prior.b
    slab = (betaln(a + before.s, b + before.n - before.s) + betaln(a + after.s, b + after.n - after.s) - 2 * betaln(a, b))
    both = before + after
    spike = betaln(a + both.s, b + both.n - both.s) - betaln(a, b)
    log_odds = math.log(pi / (1 - pi)) + slab - spike
    return 1 / (1 + math.exp(-max(-50.0, min(50.0, log_odds))))


def diff_moments(before: Counts, after: Counts, prior: Prior) -> tuple[float, float]:
    """Mean and variance of p_after − p_before with independent Beta posteriors."""
    def mv(c: Counts) -> tuple[float, float]:
        x, y = c.post(prior)
        return x / (x + y), x * y / ((x + y) ** 2 * (x + y + 1))
    (ma, va), (mb, vb) = mv(after), mv(before)
    return ma - mb, va + vb


@dataclass
class TaskEffect:
    task: str
    p: float  # P(moved)
    mean: float  # E[effect on this task's pass rate] = p · E[diff | moved]
    var: float


def task_effect(task: str, before: Counts, after: Counts, prior: Prior, pi: float, mu: float = 0.0) -> TaskEffect:
    """P(moved) and the moments of the effect; given a move, the data's difference is shrunk towards
    `mu`, the run's learned mean effect on such a task (a predicted fix tends to rise)."""
    p = p_moved(before, after, prior, pi)
    d, v = diff_moments(before, after, prior)
    v0 = EFFECT_SD ** 2
    m = (d / v + mu / v0) / (1 / v + 1 / v0) if v > 0 else d
    v = 1 / (1 / v + 1 / v0) if v > 0 else v
    return TaskEffect(task, p, p * m, p * (v + m * m) - (p * m) ** 2)


def learned_effects(run: RunFolder, it: int) -> tuple[float, float]:
    """The run's mean effect on a predicted fix and on a predicted risk that moved (earlier attributions),
    shrunk towards 0 by EFFECT_PSEUDO."""
    fix: list[float] = []
    risk: list[float] = []
    for r in range(2, it):
        att = run.iteration(r).attribution()
        if att is None:
            continue
        moved = set(att.improved) | set(att.regressed)
        for pred, out in ((att.fix_predictions.predicted, fix), (att.regression_predictions.predicted, risk)):
            out += [att.pass_rate_after.get(t, 0.0) - att.pass_rate_before.get(t, 0.0) for t in pred if t in moved]
    return sum(fix) / (len(fix) + EFFECT_PSEUDO), sum(risk) / (len(risk) + EFFECT_PSEUDO)


def _log_bf(before: Counts, after: Counts, prior: Prior) -> float:
    """Log Bayes factor, moved against not moved, of one task's two sides (the spike and slab of `p_moved`)."""
    a, b = prior.a, prior.b
    slab = betaln(a + before.s, b + before.n - before.s) + betaln(a + after.s, b + after.n - after.s) - 2 * betaln(a, b)
    both = before + after
    return slab - (betaln(a + both.s, b + both.n - both.s) - betaln(a, b))


@dataclass
class Rates:
    """P(a task a change named moves) — overall and per component class — and P(a change moves a
    given task it did not name), fitted to every round of the run so far (`fit_rates`)."""

    precision: float
    base: float
    by_component: dict[str, float] = field(default_factory=dict)

    def named(self, component: str) -> float:
        return self.by_component.get(component, self.precision)


def _round_rows(rd: _Round, run: RunFolder, it: int) -> list[tuple[list[str], int, float]]:
    """Per (round, task): the components of the changes that named it, how many changes the round
    had, and the two log marginal likelihoods. Earlier rounds compare what each round saw on its
    head with what the round before saw on its own; this round uses its judged evidence."""
    rows = []
    for r in range(2, it + 1):
        changes = rd.changes if r == it else _manifest(run, r - 1)
        if not changes:
            continue
        named = {}
        for c in changes:
            for t in named_tasks(c):
                named.setdefault(t, []).append(c.component)
        for t in rd.rp.tasks:
            if r == it:
                before, after = rd.before_counts(t), rd.after_counts(t)
            else:
                before, after = rd.rp.rounds.get(r - 1, {}).get(t, Counts()), rd.rp.rounds.get(r, {}).get(t, Counts())
            if before.n and after.n:
                rows.append((named.get(t, []), len(changes), _log_bf(before, after, rd.prior)))
    return rows


def fit_rates(rd: _Round, run: RunFolder, it: int, n: int, steps: int = 25) -> Rates:
    """P(a named task moves) and P(an unnamed one does, per change): the stated priors' level, and per
    component class the run's own ratio to it.

    The level is not learned: with two trials a side the spike absorbs a 0.2 move, so whatever the run
    learns from its own evidence says that almost nothing moves (fitted by expectation-maximisation,
    precision fell from 1/2 to about 0.1 within five rounds), the posterior grows sure that a change did
    nothing, and beneficial changes are dropped for good (measured on the development seeds: 67 % of the
    achievable gain against 72 % with the stated level). How component classes differ from one another
    is learned — by expectation-maximisation over every round so far, soft counts of P(moved), never the
    verdicts' hard calls — and scales the stated level, shrunk towards 1 by COMPONENT_PSEUDO tasks."""
    a, b = PRIOR_PRECISION
    q0, u = a / (a + b), UNNAMED_MOVES / max(1, n)
    rows = _round_rows(rd, run, it)
    if len({c for comps, _n, _bf in rows for c in comps}) < 2:
        return Rates(q0, u, {})  # one class: nothing to tell apart
    q, by_comp = q0, {}
    for _ in range(steps):
        hits = names = 0.0
        comp_hits: dict[str, float] = {}
        comp_names: dict[str, float] = {}
        for comps, n_changes, bf in rows:
            if not comps:
                continue
            qq = 1 - math.prod(1 - by_comp.get(c, q) for c in comps)
            pi = min(0.95, max(1e-4, 1 - (1 - qq) * (1 - u) ** max(1, n_changes - len(comps))))
            pm = 1 / (1 + math.exp(-max(-50.0, min(50.0, math.log(pi / (1 - pi)) + bf))))
            hits, names = hits + pm * qq / pi, names + 1
            for c in set(comps):
                comp_hits[c] = comp_hits.get(c, 0.0) + pm * qq / pi
                comp_names[c] = comp_names.get(c, 0.0) + 1
        q_new = (a + hits) / (a + b + names)
        by_comp = {c: (comp_hits[c] + COMPONENT_PSEUDO * q_new) / (comp_names[c] + COMPONENT_PSEUDO) for c in comp_names}
        done, q = abs(q_new - q) < 1e-4, q_new
        if done:
            break
    return Rates(q0, u, {c: min(0.95, max(0.01, q0 * x / q)) for c, x in by_comp.items()})


def named_tasks(c: ChangeEntry) -> set[str]:
    return set(c.predicted_fixes) | set(c.predicted_regressions) | set(c.replay_at_risk)


@dataclass
class _Judge:
    rd: _Round
    rates: Rates
    n: int
    attributed: dict[str, list[str]]
    mu_fix: float = 0.0
    mu_risk: float = 0.0
    _cache: dict = field(default_factory=dict)
    _keys: dict = field(default_factory=dict)

    @property
    def cost(self) -> float:
        return CLUTTER / self.n

    @property
    def precision(self) -> float:
        return self.rates.precision

    @property
    def base(self) -> float:
        return self.rates.base

    def pi(self, t: str) -> float:
        namers = [c for c in self.rd.changes if t in named_tasks(c)]
        miss = math.prod(1 - self.rates.named(c.component) for c in namers)
        miss *= (1 - self.base) ** max(1, len(self.rd.changes) - len(namers))
        return float(min(0.95, max(1e-4, 1 - miss)))

    def mu(self, t: str) -> float:
        fix = any(t in c.predicted_fixes for c in self.rd.changes)
        risk = any(t in c.predicted_regressions or t in c.replay_at_risk for c in self.rd.changes)
        return (self.mu_fix if fix else 0.0) + (self.mu_risk if risk else 0.0)

    def effect(self, t: str) -> TaskEffect:
        key = (self.rd.before_counts(t), self.rd.after_counts(t))
        if self._keys.get(t) != key:
            self._keys[t] = key
            self._cache[t] = task_effect(t, *key, self.rd.prior, self.pi(t), self.mu(t))
        return self._cache[t]

    def shares(self, t: str) -> dict[str, float]:
        if t in self.attributed:  # pinned by "without c" trials (an empty list: an earlier change did it)
            ids = self.attributed[t]
            return {i: 1.0 / len(ids) for i in ids}
        w = {c.id: (self.rates.named(c.component) / self.base if t in named_tasks(c) else 1.0) for c in self.rd.changes}
        # an earlier change may have moved a task nobody named (its history pooled across it): one more share
        total = sum(w.values()) + (EARLIER if all(x == 1.0 for x in w.values()) else 0.0)
        return {i: x / total for i, x in w.items()}

    def change_effects(self) -> dict[str, tuple[float, float, list[tuple[str, float, TaskEffect]]]]:
        """Per change: (mean, variance) of its effect on pass@1 and the tasks that carry it."""
        out: dict[str, tuple[float, float, list]] = {c.id: (0.0, 0.0, []) for c in self.rd.changes}
        for t in self.rd.rp.tasks:
            e = self.effect(t)
            for cid, share in self.shares(t).items():
                m, v, rows = out[cid]
                out[cid] = (m + share * e.mean / self.n, v + share * share * e.var / self.n ** 2, rows + [(t, share, e)])
        return out


def expected_loss(mean: float, var: float, cost: float) -> float:
    """The expected loss of deciding by the mean: σ·(φ(z) − |z|·(1 − Φ(|z|)))."""
    sd = math.sqrt(max(var, 1e-18))
    z = abs(mean - cost) / sd
    return sd * (math.exp(-z * z / 2) / math.sqrt(2 * math.pi) - z * 0.5 * math.erfc(z / math.sqrt(2)))


async def _screen(j: _Judge, ev: Reevaluator) -> None:
    """Tasks whose raw pass rate moved by HINGE or more get fresh trials on the head first: a rise
    nobody named has a small prior, so the value-of-information search alone would not look at it."""
    cap = int(ev.budget * SCREEN_SHARE)
    while ev.spent < cap:
        reqs = []
        for t in j.rd.rp.tasks:
            a, b = j.rd.after_counts(t), j.rd.before_counts(t)
            if a.n and b.n and abs(a.s / a.n - b.s / b.n) >= HINGE and 0.05 < j.effect(t).p < 0.95 and ev.have(t, j.rd.atag).n < 4:
                reqs.append((-abs(a.s / a.n - b.s / b.n), t))
        if not reqs:
            return
        before = ev.spent
        await ev.run([(t, j.rd.atag, ev.have(t, j.rd.atag).n + 1) for _, t in sorted(reqs)[: max(1, cap - ev.spent)]])
        if ev.spent == before:
            return


async def _gather(j: _Judge, ev: Reevaluator) -> None:
    """Re-evaluation trials where the value of information is highest (module docstring, point 4)."""
    reserve = int(ev.budget * RESERVE)
    while ev.left > reserve:
        effects = j.change_effects()
        losses = {cid: expected_loss(m, v, j.cost) for cid, (m, v, _) in effects.items()}
        cid = max(losses, key=lambda i: losses[i], default=None)
        if cid is None or losses[cid] * j.n < MIN_LOSS:
            return
        rows = sorted(effects[cid][2], key=lambda r: -(r[1] ** 2) * r[2].var)
        reqs = []
        for t, _share, _e in rows[:BATCH]:
            # the base's own trials, not its pooled history: history may sit on another level
            a, b = j.rd.after_counts(t), j.rd.rp.ledger.exact(t, j.rd.before) + ev.have(t, j.rd.btag)
            side = j.rd.atag if a.n <= b.n else j.rd.btag
            reqs.append((t, side, ev.have(t, side).n + 1))
        before = ev.spent
        await ev.run(reqs[: max(1, ev.left - reserve)])
        if ev.spent == before:
            return


def p_above_cost(mean: float, var: float, cost: float) -> float:
    """P(effect > cost) under a normal approximation of the posterior."""
    return 0.5 * math.erfc(-(mean - cost) / (math.sqrt(max(var, 1e-18)) * math.sqrt(2)))


def _verdict(j: _Judge, c: ChangeEntry, mean: float, var: float, rows: list, final: bool) -> ChangeVerdict:
    sd = math.sqrt(max(var, 1e-18))
    p_above = p_above_cost(mean, var, j.cost)
    keep = p_above >= keep_bar(final)
    touched = sorted(t for t, share, e in rows if share * e.p >= TOUCH_AT)
    ups = [t for t in touched if next(e for x, _s, e in rows if x == t).mean > 0]
    downs = [t for t in touched if t not in ups]
    reason = (f"expected effect on pass@1 {100 * mean:+.2f} points (sd {100 * sd:.2f}) against a clutter cost of "
              f"{100 * j.cost:.2f}" + (f"; moved up {', '.join(ups)}" if ups else "") + (f"; down {', '.join(downs)}" if downs else "")
              + ("" if touched else "; no task moved that it could have touched")
              + (f"; kept while later rounds judge it again (P(effect > cost) {p_above:.2f} ≥ {keep_bar(final)})"
                 if keep and mean <= j.cost else ""))
    return ChangeVerdict(
        change_id=c.id, commit=c.commit, component=c.component, verdict="keep" if keep else "rollback", reason=reason,
        predicted_fixes=list(c.predicted_fixes), fixes_improved=[t for t in c.predicted_fixes if t in ups],
        fixes_not_improved=[t for t in c.predicted_fixes if t not in ups], predicted_regressions=list(c.predicted_regressions),
        regressions_happened=[t for t in c.predicted_regressions if t in downs],
        unpredicted_regressions=[t for t in downs if t not in c.predicted_regressions], replay_at_risk=list(c.replay_at_risk),
        confidence=round(p_above if keep else 1 - p_above, 4), touched_tasks=touched)


def _earlier_keeps(run: RunFolder, it: int) -> dict[str, tuple[ChangeVerdict, int, int]]:
    """change key -> (its latest verdict, the iteration that made it, the attribution that judged it first), for keeps."""
    out: dict[str, tuple[ChangeVerdict, int, int]] = {}
    for r in range(2, it):
        att = run.iteration(r).attribution()
        if att is None:
            continue
        for v in att.changes + att.rejudged:
            made = v.change_iteration if v.change_iteration is not None else r - 1
            key = change_key(made, v.change_id)
            first = out[key][2] if key in out else r
            out[key] = (v, made, first)
    return {k: x for k, x in out.items() if x[0].verdict == "keep"}


def _rejudge(j: _Judge, run: RunFolder, it: int, led: Ledger, final: bool) -> list[ChangeVerdict]:
    """Earlier keeps still in the harness, judged again with everything since (point 5): on every task,
    all trials with the change against all trials without it — a harm its own round did not see
    (a lucky pair of trials) shows here once later rounds have run the task with it."""
    rd, out = j.rd, []
    for key, (v, made, _first) in sorted(_earlier_keeps(run, it).items()):
        if key not in rd.before:
            continue
        sides = Ledger(obs=led.obs, judged=led.judged, touched={**led.touched, key: set(rd.rp.tasks)})
        named = set(v.predicted_fixes) | set(v.predicted_regressions) | set(v.replay_at_risk)
        rows, mean, var = [], 0.0, 0.0
        for t in rd.rp.tasks:
            with_c, without = sides.pooled(t, rd.before), sides.pooled(t, rd.before - {key})
            if not with_c.n or not without.n:
                continue
            pi = 0.5 if t in v.touched_tasks else j.precision if t in named else j.base
            e = task_effect(t, without, with_c, rd.prior, pi)
            mean, var = mean + e.mean / j.n, var + e.var / j.n ** 2
            if t in v.touched_tasks or e.p >= TOUCH_AT:
                rows.append(WatchEvidence(task=t, with_change=(with_c.s, with_c.n), without=(without.s, without.n), p_up=round(e.p, 4)))
        if p_above_cost(mean, var, j.cost) >= keep_bar(final):  # the same bar as a new change's
            continue
        sd = math.sqrt(max(var, 1e-18))
        p_below = 1 - p_above_cost(mean, var, j.cost)
        out.append(v.model_copy(update={
            "verdict": "rollback", "change_iteration": made, "watch_evidence": rows, "confidence": round(p_below, 4),
            "reason": (f"judged again on every task, all trials with it against all without it: expected effect on pass@1 "
                       f"{100 * mean:+.2f} points (sd {100 * sd:.2f}) against a clutter cost of {100 * j.cost:.2f}: "
                       f"P(effect > cost) {1 - p_below:.2f} < {keep_bar(final)}")}))
    return out


async def _pin_shared(j: _Judge, ev: Reevaluator, repo: Any) -> dict[str, str]:
    """Tasks that surely moved while several changes could have done it: "head without c" trials
    (as `noise` pins), out of at most PIN_SHARE of the budget, H_best's reserve left alone."""
    movers = {}
    for t in j.rd.rp.tasks:
        e = j.effect(t)
        if e.p >= PIN_AT and len([s for s in j.shares(t).values() if s > 0.05]) > 1:
            movers[t] = "up" if e.mean > 0 else "down"
    if not movers:
        return {}
    full = ev.budget
    ev.budget = min(full - int(full * RESERVE), ev.spent + int(full * PIN_SHARE))
    try:
        pinned, how = await _pin(j.rd, movers, repo)
    finally:
        ev.budget = full
    j.attributed = {t: ids for t, ids in pinned.items() if ids or how.get(t, "").startswith("no change")}
    return how


async def attribute_expected_value(run: RunFolder, it: int, repo: Any, *, reevaluator: Reevaluator | None,
                                   final: bool = True) -> Attribution:
    rd = open_round(run, it, repo, reevaluator)
    changes, rp = rd.changes, rd.rp
    mu_fix, mu_risk = learned_effects(run, it)
    j = _Judge(rd, fit_rates(rd, run, it, max(1, len(rp.tasks))), max(1, len(rp.tasks)), {}, mu_fix, mu_risk)
    how: dict[str, str] = {}
    if reevaluator is not None and changes:
        await _screen(j, reevaluator)
    if reevaluator is not None and len(changes) > 1:
        how = await _pin_shared(j, reevaluator, repo)
    if reevaluator is not None and changes:
        await _gather(j, reevaluator)
    effects = j.change_effects()
    verdicts = [_verdict(j, c, *effects[c.id], final) for c in changes]
    led = Ledger(obs=rp.ledger.obs, judged=set(rp.ledger.judged), touched={k: set(v) for k, v in rp.ledger.touched.items()})
    rejudged = _rejudge(j, run, it, led, final)
    movers = {t: ("up" if e.mean > 0 else "down") for t in rp.tasks if (e := j.effect(t)).p >= TOUCH_AT}
    predicted = {t for c in changes for t in named_tasks(c)}
    att = _attribution(rd, movers, {t: [cid for cid, s in j.shares(t).items() if s * j.effect(t).p >= TOUCH_AT]
                                    for t in movers}, how, predicted, verdicts, run)
    att.strictness = "expected-value"
    att.rejudged = rejudged
    return att


class ExpectedValuePolicy:
    """`strictness: expected-value`: keep a change when its posterior expected effect on pass@1
    exceeds the clutter cost; H_best keeps the latest harness unless another one's lead is decisive."""

    name = "expected-value"
    best_keeps_latest = True

    def judge(self, change: ChangeEntry, evidence: Any) -> ChangeVerdict:
        """One round's counts only (no history, no trials): the same rule on what is given."""
        tasks = {t: e for t, e in evidence.tasks.items() if e.before_trials and e.after_trials}
        prior = fit_prior([Counts(e.before_passed or 0, e.before_trials or 0) for e in tasks.values()])
        n = max(1, len(evidence.tasks))
        mine = named_tasks(change)
        mean = var = 0.0
        ups, downs = [], []
        share = 1.0 / max(1, len(evidence.changes))
        for t, e in tasks.items():
            eff = task_effect(t, Counts(e.before_passed or 0, e.before_trials or 0), Counts(e.after_passed or 0, e.after_trials or 0),
                              prior, 1 / 3 if t in mine else 0.01)
            w = 1.0 if len(evidence.changes) <= 1 or t in mine else share
            mean, var = mean + w * eff.mean / n, var + w * w * eff.var / n ** 2
            if w * eff.p >= TOUCH_AT:
                (ups if eff.mean > 0 else downs).append(t)
        keep = mean > CLUTTER / n
        return verdict_from_movement(change, keep, f"expected effect on pass@1 {100 * mean:+.2f} points against a clutter cost "
                                     f"of {100 * CLUTTER / n:.2f} (one round's counts only)", ups, downs)

    async def judge_round(self, ctx: Any, it: int) -> Attribution:
        from ahe.evolution.context import reeval_executor, rollout_config

        results = ctx.run.iteration(it).results()
        n_tasks = len(results.tasks) if results else 0
        final = it >= ctx.cfg.iterations + (1 if ctx.cfg.evaluate_final else 0)  # no later round will judge it again
        with reeval_executor(ctx) as executor:
            ev = make_reevaluator(ctx.repo, ctx.run.iteration(it), rollout_config(ctx), executor,
                                  budget=int(ctx.cfg.attribution.reeval_share * n_tasks * ctx.cfg.k))
            return await attribute_expected_value(ctx.run, it, ctx.repo, reevaluator=ev, final=final)
