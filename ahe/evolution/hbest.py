"""H_best without the winner's curse (`strictness: noise`, docs/decisions.md point 6).

After each rollback, every distinct harness the run evaluated (and the harness the rollback
left) is estimated task by task from all pooled evidence about it (`Ledger.pooled`). Tasks no
judged change touched share their evidence across harnesses, so two harnesses differ only on
the tasks their differing changes touched. Before the leader is declared best, its lead over
the runner-up must pass the verdicts' test: P(leader's pass rate summed over those tasks >
runner-up's) ≥ 0.9. When it does not, those tasks are re-run on both harnesses, most uncertain
first, out of what the iteration's re-evaluation budget has left after attribution, until the
lead is decisive (either way) or the budget is spent; then the leader is declared best.

Trials go to `iterations/NNN/reeval/<task>/hbest-NNN-<rRRR|head>/trial-<n>` through the same
`Reevaluator` (a finished trial is never re-run; the choice is deterministic given the
finished trials, so a killed rollback phase resumes it), and the decision with its evidence
is written into `reeval.json` (`best`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ahe.evolution.evidence import Counts, Ledger, Prior, fit_prior
from ahe.evolution.noise import KEEP_AT, MAX_EXTRA, Replay, replay
from ahe.evolution.reeval import Reevaluator, tag_commit
from ahe.run_folder import LATEST_REASON, BestCandidate, BestDecision, ReevalHarness, ReevalSummary, read_model, write_model

DRAWS = 4000
# a measured harness would replace the decisions' one at this P(lead): off (> 1) — at 0.9 and at 0.99 the replacement
# cost H_best on 4 worlds of eval seeds 1000-1009 (random-manifests 88 -> 82 %); the head stays and the reason says so
REPLACE_AT = 1.01


@dataclass(frozen=True)
class Candidate:
    round: int
    commit: str
    state: frozenset[str]
    tag: str  # the tag its H_best re-evaluation trials run on


def candidates(rp: Replay, it: int, head_commit: str) -> list[Candidate]:
    """One candidate per distinct harness state; a state evaluated twice is the later one."""
    by_state: dict[frozenset[str], Candidate] = {}
    for r, st in sorted(rp.states.items()):
        by_state[st] = Candidate(r, rp.commits[r], st, f"hbest-{it:03d}-r{r:03d}")
    by_state[rp.now] = Candidate(it, head_commit, rp.now, f"hbest-{it:03d}-head")
    return sorted(by_state.values(), key=lambda c: c.round)


def differing_tasks(ledger: Ledger, tasks: list[str], a: Candidate, b: Candidate) -> list[str]:
    """Tasks on which the evidence about `a` and `b` is not shared (a differing change may touch them)."""
    diff = a.state ^ b.state
    return [t for t in tasks if any(ch not in ledger.judged or t in ledger.touched.get(ch, set()) for ch in diff)]


@dataclass
class _Evidence:
    """The replayed ledger plus this choice's own re-evaluation trials (kept apart for resume)."""

    base: Ledger
    tasks: list[str]
    prior: Prior
    ev: Reevaluator
    cands: list[Candidate]

    def ledger(self) -> Ledger:
        led = Ledger(obs={t: dict(per) for t, per in self.base.obs.items()}, judged=self.base.judged, touched=self.base.touched)
        for c in self.cands:
            for t in self.tasks:
                got = self.ev.have(t, c.tag)
                led.add(t, c.state, got.s, got.n)
        return led

    def mean(self, c: Counts) -> float:
        return (self.prior.a + c.s) / (self.prior.a + self.prior.b + c.n)

    def ranked(self, led: Ledger) -> list[tuple[float, Candidate]]:
        est = [(sum(self.mean(led.pooled(t, c.state)) for t in self.tasks) / max(1, len(self.tasks)), c) for c in self.cands]
        return sorted(est, key=lambda e: (round(e[0], 9), e[1].round), reverse=True)  # ties: the latest harness

    def p_lead(self, led: Ledger, a: Candidate, b: Candidate, tasks: list[str], seed: int) -> float:
        """Posterior P(Σ over `tasks` of p_a − p_b > 0), Beta(prior + counts) per task and side."""
        rng = np.random.default_rng(seed)
        net = np.zeros(DRAWS)
        for t in tasks:
            ca, cb = led.pooled(t, a.state), led.pooled(t, b.state)
            net += rng.beta(*ca.post(self.prior), DRAWS) - rng.beta(*cb.post(self.prior), DRAWS)
        return float((net > 0).mean())

    def spread(self, led: Ledger, t: str, a: Candidate, b: Candidate) -> float:
        def var(c: Counts) -> float:
            x, y = c.post(self.prior)
            return x * y / ((x + y) ** 2 * (x + y + 1))
        return var(led.pooled(t, a.state)) + var(led.pooled(t, b.state))


async def choose_best(ctx: Any, it: int, *, latest: bool = False) -> tuple[Candidate, float, BestDecision]:
    """Declare H_best after iteration `it`'s rollback; returns (best, estimated pass@1, decision).

    With `latest` the harness the rollback left is best without a contest: the policy judged every
    change in it again on every harness the run evaluated (`expected-value`), so an earlier harness
    is one its decisions chose against."""
    from ahe.evolution.context import reeval_executor

    with reeval_executor(ctx) as executor:
        return await _choose_best(ctx, it, executor, latest)


async def _choose_best(ctx: Any, it: int, executor: Any, latest: bool = False) -> tuple[Candidate, float, BestDecision]:
    from ahe.evolution.context import rollout_config
    from ahe.evolution.reeval import make_reevaluator

    folder = ctx.run.iteration(it)
    summary = read_model(folder.reeval_json, ReevalSummary)
    rp = replay(ctx.run, it, complete=True, best_of_it=False)
    prior = Prior(*summary.prior) if summary and summary.prior else fit_prior([rp.ledger.pooled(t, frozenset()) for t in rp.tasks])
    budget = (summary.budget - summary.spent) if summary else int(ctx.cfg.attribution.reeval_share * len(rp.tasks) * ctx.cfg.k)
    ev = make_reevaluator(ctx.repo, folder, rollout_config(ctx), executor, budget=max(0, budget))
    e = _Evidence(rp.ledger, rp.tasks, prior, ev, candidates(rp, it, ctx.repo.head()))
    leader_before: str | None = None
    reeval_tasks: set[str] = set()
    while True:
        led = e.ledger()
        ranked = e.ranked(led)
        if len(ranked) < 2:
            return _decide(e, ranked, [], None, leader_before, reeval_tasks, "the only harness evaluated")
        (_, a), (_, b) = ranked[0], ranked[1]
        leader_before = a.commit if leader_before is None else leader_before
        if latest:
            if it >= ctx.cfg.iterations + (1 if ctx.cfg.evaluate_final else 0):  # the final choice: checked
                return await _latest(ctx, e, rp, it, leader_before, reeval_tasks)
            head = next(x for x in ranked if x[1].round == it and x[1].state == rp.now)
            return _decide(e, [head] + [x for x in ranked if x is not head], [], None, leader_before, reeval_tasks, LATEST_REASON)
        tasks = differing_tasks(led, rp.tasks, a, b)
        if not tasks:
            return _decide(e, ranked, tasks, None, leader_before, reeval_tasks,
                           "the two best harnesses differ on no task's evidence: the latest wins")
        p = e.p_lead(led, a, b, tasks, seed=it)
        if p >= KEEP_AT or p <= 1 - KEEP_AT:
            return _decide(e, ranked, tasks, p, leader_before, reeval_tasks, "the lead is decisive by the evidence")
        order = sorted((t for t in tasks if max(ev.have(t, a.tag).n, ev.have(t, b.tag).n) < MAX_EXTRA),
                       key=lambda t: (-e.spread(led, t, a, b), t))
        if ev.left < 2 or not order:
            return _decide(e, ranked, tasks, p, leader_before, reeval_tasks,
                           "not decisive; the re-evaluation budget is spent" if ev.left < 2 else
                           f"not decisive after {MAX_EXTRA} re-evaluation trials per task and harness")
        for c in (a, b):
            if tag_commit(ctx.repo, c.tag) is None:
                ctx.repo.tag(c.tag, c.commit)
        batch = order[: ev.left // 2]
        reeval_tasks.update(batch)
        await ev.run([(t, c.tag, ev.have(t, c.tag).n + 1) for t in batch for c in (a, b)])
        if ctx.should_stop():
            from ahe.evolution.context import StopRequested

            raise StopRequested()


async def _latest(ctx: Any, e: _Evidence, rp: Replay, it: int, leader_before: str | None,
                  reeval_tasks: set[str]) -> tuple[Candidate, float, BestDecision]:
    """The harness the decisions left, checked against every harness the run measured (issue 35): a measured
    harness whose estimate is above it is contested on the tasks they differ on — the head is measured there
    first (re-evaluation trials of both) when it has not been — and wins only when its lead is decisive. The
    decision's reason says so either way; without a contest it is LATEST_REASON."""
    ev = e.ev
    while True:
        led = e.ledger()
        ranked = e.ranked(led)
        head = next(x for x in ranked if x[1].round == it and x[1].state == rp.now)
        others = [x for x in ranked if x[1].state != rp.now]
        rival = others[0] if others else None
        tasks = differing_tasks(led, rp.tasks, rival[1], head[1]) if rival else []
        unmeasured = [t for t in tasks if not led.exact(t, head[1].state).n]  # the head's estimate there is borrowed
        if rival is None or not tasks or (rival[0] <= head[0] + 1e-9 and not unmeasured):
            return _decide(e, [head] + [x for x in ranked if x is not head], [], None, leader_before, reeval_tasks, LATEST_REASON)
        p = e.p_lead(led, rival[1], head[1], tasks, seed=it)
        order = sorted((t for t in tasks if max(ev.have(t, rival[1].tag).n, ev.have(t, head[1].tag).n) < MAX_EXTRA),
                       key=lambda t: (t not in unmeasured, -e.spread(led, t, rival[1], head[1]), t))
        if (not unmeasured and (p >= REPLACE_AT or p <= 1 - KEEP_AT)) or ev.left < 2 or not order:
            if p <= 0.5 and not unmeasured:
                return _decide(e, [head] + [x for x in ranked if x is not head], tasks, None, leader_before, reeval_tasks,
                               LATEST_REASON + f"; measured against the best other harness on {len(tasks)} task(s): "
                               f"P(it leads) {1 - p:.2f}")
            words = (f"harness of round {rival[1].round} (estimated pass@1 {rival[0]:.3f}) against the harness the decisions "
                     f"left ({head[0]:.3f}) on {len(tasks)} task(s) they differ on: P(lead) {p:.2f}")
            if p >= REPLACE_AT:
                return _decide(e, [rival, head] + [x for x in ranked if x not in (rival, head)], tasks, p, leader_before,
                               reeval_tasks, f"a measured harness beats the latest: {words}, decisive")
            return _decide(e, [head, rival] + [x for x in ranked if x not in (rival, head)], tasks, None, leader_before,
                           reeval_tasks, f"the latest harness, although a measured one is estimated above it: {words}, not decisive")
        for c in (rival[1], head[1]):
            if tag_commit(ctx.repo, c.tag) is None:
                ctx.repo.tag(c.tag, c.commit)
        batch = order[: ev.left // 2]
        reeval_tasks.update(batch)
        await ev.run([(t, c.tag, ev.have(t, c.tag).n + 1) for t in batch for c in (rival[1], head[1])])


def _decide(e: _Evidence, ranked: list[tuple[float, Candidate]], tasks: list[str], p: float | None,
            leader_before: str | None, reeval_tasks: set[str], reason: str) -> tuple[Candidate, float, BestDecision]:
    est, best = ranked[0]
    runner = ranked[1][1] if len(ranked) > 1 else None
    if p is not None and p < 0.5 and runner is not None:  # the test disagrees with the means: follow the test
        (est, best), runner, p = ranked[1], ranked[0][1], 1 - p
    ev = e.ev
    decision = BestDecision(
        candidates=[BestCandidate(round=c.round, commit=c.commit, state=sorted(c.state), estimate=round(x, 6)) for x, c in ranked],
        leader_before=leader_before, best_round=best.round, best_commit=best.commit, runner_up=runner.commit if runner else None, tasks=tasks,
        reeval_tasks=sorted(reeval_tasks), p_lead=None if p is None else round(p, 4), decisive=p is not None and p >= KEEP_AT,
        budget=ev.budget, spent=ev.spent, run_now=ev.ran, tokens=ev.usage.total_tokens,
        cost_usd=round(ev.usage.cost_usd or 0.0, 6), reason=reason,
        harnesses={c.tag: ReevalHarness(commit=c.commit, state=sorted(c.state)) for c in e.cands
                   if any(ev.have(t, c.tag).n for t in e.tasks)})
    return best, est, decision


def record(run: Any, it: int, decision: BestDecision) -> ReevalSummary:
    """Write the decision into the iteration's reeval.json (made by attribution, or a fresh one)."""
    path = run.iteration(it).reeval_json
    summary = read_model(path, ReevalSummary) or ReevalSummary(budget=decision.budget, spent=0, run_now=0)
    summary.best = decision
    write_model(path, summary)
    return summary
