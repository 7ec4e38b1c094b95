"""Earlier keeps judged again (the expected-value policy, docs/decisions.md point 6).

Every round, each change an earlier round kept and still in the harness is judged again on every
task: all trials with it against all trials without it (the run's history pooled as under
`noise`, plus this round's re-evaluation trials on the base, which carries it, and on the base
with it undone, tag `base-NNN-without-MMM-chg-K`). The trials of the round that first judged it
are left out of its side once later rounds have run the task with it at least as often: they
chose it (a lucky pair of trials is why a neutral change is kept), so they cannot also confirm it.
Re-evaluation trials reach an earlier keep through the same value-of-information search as the
round's new changes (`expected_value._gather`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ahe.evolution.evidence import Counts, Ledger
from ahe.evolution.ev_model import TaskEffect, keep_bar, p_above_cost, task_effect
from ahe.evolution.noise import change_key
from ahe.run_folder import ChangeVerdict, RunFolder, WatchEvidence

TOUCH_AT = 0.5  # P(moved) at which a task is listed in the re-judgement's evidence
LEAVE_OUT = True  # the round that chose a keep is left out of its side once later rounds ran the task as often (False: the ablation in docs/decisions.md)
MAX_SIDE = 12  # re-evaluation trials per task and side for one earlier keep


@dataclass
class Keep:
    key: str
    verdict: ChangeVerdict  # its latest verdict (a keep)
    made: int  # the iteration that made it
    first: int  # the attribution that judged it first: its trials chose it


def earlier_keeps(run: RunFolder, it: int) -> list[Keep]:
    """Changes whose latest verdict before attribution `it` is keep, by change key."""
    out: dict[str, Keep] = {}
    for r in range(2, it):
        att = run.iteration(r).attribution()
        if att is None:
            continue
        for v in att.changes + att.rejudged:
            made = v.change_iteration if v.change_iteration is not None else r - 1
            key = change_key(made, v.change_id)
            out[key] = Keep(key, v, made, out[key].first if key in out else r)
    return [k for _, k in sorted(out.items()) if k.verdict.verdict == "keep"]


@dataclass
class KeepJudge:
    """One earlier keep's evidence in this round; `rd` is the round (`noise._Round`), `led` its ledger."""

    rd: Any
    keep: Keep
    led: Ledger
    precision: float
    base: float
    n: int
    chose: dict[str, Counts] = field(default_factory=dict)  # task -> the trials that chose it (what its first round saw on its head)
    _cache: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.led = Ledger(obs=self.led.obs, judged=self.led.judged, touched={**self.led.touched, self.keep.key: set(self.rd.rp.tasks)})

    @property
    def wtag(self) -> str:
        return f"{self.rd.btag}-without-{self.keep.made:03d}-{self.keep.verdict.change_id}"

    def sides(self, t: str) -> tuple[Counts, Counts]:
        rd, ev = self.rd, self.rd.ev
        with_c = self.led.pooled(t, rd.before) + (ev.have(t, rd.btag) if ev else Counts())
        chose = self.chose.get(t, Counts())
        seen = rd.rp.states.get(self.keep.first)
        if LEAVE_OUT and chose.n and seen is not None and self.led.compatible(t, seen, rd.before) and with_c.n - chose.n >= chose.n:
            with_c = Counts(with_c.s - chose.s, with_c.n - chose.n)  # later rounds ran it as often: leave out what chose it
        without = self.led.pooled(t, rd.before - {self.keep.key}) + (ev.have(t, self.wtag) if ev else Counts())
        return with_c, without

    def effect(self, t: str) -> tuple[TaskEffect, Counts, Counts] | None:
        with_c, without = self.sides(t)
        if not with_c.n or not without.n:
            return None
        if self._cache.get(t, (None,))[0] != (with_c, without):
            v = self.keep.verdict
            named = set(v.predicted_fixes) | set(v.predicted_regressions) | set(v.replay_at_risk)
            pi = 0.5 if t in v.touched_tasks else self.precision if t in named else self.base
            self._cache[t] = ((with_c, without), task_effect(t, without, with_c, self.rd.prior, pi))
        return self._cache[t][1], with_c, without

    def moments(self) -> tuple[float, float, list[tuple[str, TaskEffect, Counts, Counts]]]:
        rows, mean, var = [], 0.0, 0.0
        for t in self.rd.rp.tasks:
            got = self.effect(t)
            if got is None:
                continue
            e, with_c, without = got
            mean, var = mean + e.mean / self.n, var + e.var / self.n ** 2
            rows.append((t, e, with_c, without))
        return mean, var, rows

    def requests(self, batch: int, repo: Any) -> list[tuple[str, str, int]]:
        """Trials on the tasks that carry most of the variance, on the side with fewer trials."""
        from ahe.evolution.reeval import tag_commit, without_change

        rd, ev = self.rd, self.rd.ev
        _m, _v, rows = self.moments()
        out = []
        for t, _e, with_c, without in sorted(rows, key=lambda r: -r[1].var):
            order = [rd.btag, self.wtag] if with_c.n <= without.n else [self.wtag, rd.btag]
            side = next((s for s in order if ev.have(t, s).n < MAX_SIDE), None)
            if side is None:
                continue
            if side == self.wtag and tag_commit(repo, self.wtag) is None:
                without_change(repo, tag_commit(repo, rd.btag), self.keep.verdict.commit, self.wtag)
            rd.extra_states[self.wtag] = rd.before - {self.keep.key}
            out.append((t, side, ev.have(t, side).n + 1))
            if len(out) >= batch:
                break
        return out


def keep_judges(rd: Any, run: RunFolder, it: int, led: Ledger, precision: float, base: float, n: int) -> list[KeepJudge]:
    out = []
    for k in earlier_keeps(run, it):
        if k.key not in rd.before:
            continue
        # what that round saw on its head: its rollout and its re-evaluation trials there (leaving out only the
        # rollout kept more neutral changes and lost gain on the development seeds)
        out.append(KeepJudge(rd, k, led, precision, base, n, dict(rd.rp.rounds.get(k.first, {}))))
    return out


def rejudge(judges: list[KeepJudge], cost: float, final: bool) -> list[ChangeVerdict]:
    """Earlier keeps that no longer clear the bar (0.25 before the last look, 0.5 at it): rolled back."""
    out = []
    for kj in judges:
        mean, var, rows = kj.moments()
        p_above = p_above_cost(mean, var, cost)
        if p_above >= keep_bar(final):  # the same bar as a new change's
            continue
        v = kj.keep.verdict
        watch = [WatchEvidence(task=t, with_change=(w.s, w.n), without=(wo.s, wo.n), p_up=round(e.p, 4))
                 for t, e, w, wo in rows if t in v.touched_tasks or e.p >= TOUCH_AT]
        sd = math.sqrt(max(var, 1e-18))
        out.append(v.model_copy(update={
            "verdict": "rollback", "change_iteration": kj.keep.made, "watch_evidence": watch, "confidence": round(1 - p_above, 4),
            "reason": (f"judged again on every task, all trials with it against all without it (the round that chose it left "
                       f"out where later rounds ran the task as often): expected effect on pass@1 {100 * mean:+.2f} points "
                       f"(sd {100 * sd:.2f}) against a clutter cost of {100 * cost:.2f}: P(effect > cost) {p_above:.2f} < "
                       f"{keep_bar(final)}")}))
    return out
