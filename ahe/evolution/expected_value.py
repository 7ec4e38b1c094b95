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
   rise nobody named starts from a small prior). Then re-evaluation trials go where the **value
   of information** is highest: the decision — a new change's, or an earlier keep's judged again
   — with the largest expected loss (σ·(φ(z) − |z|·(1 − Φ(|z|))), z = (μ − cost)/σ), on the tasks
   that carry most of its variance, until no decision is worth a trial or the budget (minus
   H_best's reserved share) is spent. The budget is the run's (`run_budget`): what an iteration
   leaves unspent carries to later ones, where the last looks are final.
5. Earlier keeps are judged again every round (`ev_keeps`) on everything with them against
   everything without them, by the same bar, the trials of the round that chose them left out
   once later rounds ran the task as often; one that no longer clears it is rolled back.
6. Given a move, a task's effect is shrunk towards the run's learned mean effect on such tasks
   (predicted fixes that moved rose by this much on average; predicted risks fell by that much),
   so a change whose kind has helped in this run gets the benefit of its own track record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ahe.evolution.evidence import Counts, Ledger, fit_prior
from ahe.evolution.ev_keeps import KeepJudge, keep_judges, rejudge
from ahe.evolution.ev_model import TaskEffect, expected_loss, keep_bar, log_bf, p_above_cost, p_moved, task_effect  # noqa: F401
from ahe.evolution.noise import _attribution, _manifest, _pin, _Round, open_round, verdict_from_movement
from ahe.evolution.reeval import Reevaluator, make_reevaluator
from ahe.harness.manifest import ChangeEntry
from ahe.run_folder import Attribution, ChangeVerdict, ReevalSummary, RunFolder, read_model

CLUTTER = 0.15  # a neutral change kept costs this share of one task's pass rate (÷ tasks: pass@1 units)
RESERVE = 0.25  # of the round's re-evaluation budget, kept for H_best
MIN_LOSS = 0.003  # stop re-evaluating when no decision's expected loss exceeds this share of one task
PIN_AT = 0.8  # P(moved) above which a task shared by several changes is pinned with "without c" trials
KEEP_VOI = True  # earlier keeps compete for re-evaluation trials with the round's changes (False: the ablation in docs/decisions.md)
CARRY = True  # an iteration's unspent re-evaluation budget carries to later ones (False: the ablation in docs/decisions.md)
TOUCH_AT = 0.5  # a change's share of P(moved) at which the task counts as touched by it (history stops pooling)
PRIOR_PRECISION = (2.0, 2.0)  # Beta prior of "a named task moves" (mean 1/2: wider than the paper's 1/3, see fit_rates)
UNNAMED_MOVES = 3.0  # prior: a change may move about this many tasks its manifest did not name
HINGE = 0.3  # a raw rate gap that earns screening trials before the value-of-information search
SCREEN_SHARE = 0.3  # of the budget, at most this much on screening
EFFECT_PSEUDO = 4.0  # pseudo-observations of a zero effect the learned mean starts from
BATCH = 4  # tasks re-run per value-of-information step
PIN_SHARE = 0.4  # of the budget, at most this much on "head without c" trials
COMPONENT_PSEUDO = 4.0  # a component class's named-task precision is shrunk towards the overall one by this many tasks
EARLIER = 1.0  # weight of "an earlier change did it" for a task no change of the round named


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
                rows.append((named.get(t, []), len(changes), log_bf(before, after, rd.prior)))
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
    allow: int = 0  # this iteration's own share of the re-evaluation budget (screening, pinning and the reserve scale with it)
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


async def _screen(j: _Judge, ev: Reevaluator) -> None:
    """Tasks whose raw pass rate moved by HINGE or more get fresh trials on the head first: a rise
    nobody named has a small prior, so the value-of-information search alone would not look at it."""
    cap = ev.spent + int(j.allow * SCREEN_SHARE)
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


async def _gather(j: _Judge, ev: Reevaluator, keeps: list[KeepJudge], repo: Any) -> None:
    """Re-evaluation trials where the value of information is highest (module docstring, point 4): the
    decision with the largest expected loss among the round's changes and the earlier keeps judged again."""
    reserve = int(j.allow * RESERVE)
    while ev.left > reserve:
        effects = j.change_effects()
        losses: dict[Any, float] = {cid: expected_loss(m, v, j.cost) for cid, (m, v, _) in effects.items()}
        if KEEP_VOI:
            losses.update({i: expected_loss(*kj.moments()[:2], j.cost) for i, kj in enumerate(keeps)})
        cid = max(losses, key=lambda i: losses[i], default=None)
        if cid is None or losses[cid] * j.n < MIN_LOSS:
            return
        if isinstance(cid, int):
            reqs = keeps[cid].requests(BATCH, repo)
        else:
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
    ev.budget = min(full - int(j.allow * RESERVE), ev.spent + int(j.allow * PIN_SHARE))
    try:
        pinned, how = await _pin(j.rd, movers, repo)
    finally:
        ev.budget = full
    j.attributed = {t: ids for t, ids in pinned.items() if ids or how.get(t, "").startswith("no change")}
    return how


async def attribute_expected_value(run: RunFolder, it: int, repo: Any, *, reevaluator: Reevaluator | None,
                                   final: bool = True, allowance: int | None = None) -> Attribution:
    """Judge iteration it−1's changes and every earlier keep. `allowance`: this iteration's own share of
    the run's re-evaluation budget (the reevaluator's budget may be larger: what earlier ones left)."""
    rd = open_round(run, it, repo, reevaluator)
    changes, rp = rd.changes, rd.rp
    mu_fix, mu_risk = learned_effects(run, it)
    n = max(1, len(rp.tasks))
    j = _Judge(rd, fit_rates(rd, run, it, n), n, {}, mu_fix, mu_risk)
    if reevaluator is not None:
        j.allow = min(reevaluator.budget, allowance if allowance is not None else reevaluator.budget)
    led = Ledger(obs=rp.ledger.obs, judged=set(rp.ledger.judged), touched={k: set(v) for k, v in rp.ledger.touched.items()})
    keeps = keep_judges(rd, run, it, led, j.precision, j.base, n)
    how: dict[str, str] = {}
    if reevaluator is not None and changes:
        await _screen(j, reevaluator)
    if reevaluator is not None and len(changes) > 1:
        how = await _pin_shared(j, reevaluator, repo)
    if reevaluator is not None and (changes or keeps):
        await _gather(j, reevaluator, keeps, repo)
    effects = j.change_effects()
    verdicts = [_verdict(j, c, *effects[c.id], final) for c in changes]
    rejudged = rejudge(keeps, j.cost, final)
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
        allowance = int(ctx.cfg.attribution.reeval_share * n_tasks * ctx.cfg.k)
        budget = run_budget(ctx.run, it, allowance) if CARRY else allowance
        with reeval_executor(ctx) as executor:
            ev = make_reevaluator(ctx.repo, ctx.run.iteration(it), rollout_config(ctx), executor, budget=budget)
            return await attribute_expected_value(ctx.run, it, ctx.repo, reevaluator=ev, final=final, allowance=allowance)


def run_budget(run: RunFolder, it: int, allowance: int) -> int:
    """This iteration's re-evaluation budget: the run's, `allowance` per iteration judged so far, less what
    earlier iterations spent (attribution and H_best). A trial an early round did not need is spent where
    the value of information is higher — at the last looks, where a decision is final."""
    spent = 0
    for r in range(2, it):
        info = read_model(run.iteration(r).reeval_json, ReevalSummary)
        if info is not None:
            spent += info.spent + (info.best.spent if info.best else 0)
    return max(allowance, allowance * (it - 1) - spent)
