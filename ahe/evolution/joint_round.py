"""The joint model (`ahe.evolution.joint`) applied to one round: every change in the harness
judged on every trial the run made, each trial placed by the harness state it ran on."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from ahe.evolution.evidence import Counts
from ahe.evolution.joint import Effect, task_effects
from ahe.evolution.noise import _manifest, _Round, _state_of, change_key
from ahe.harness.manifest import ChangeEntry
from ahe.run_folder import RunFolder


def run_changes(run: RunFolder, it: int) -> dict[str, ChangeEntry]:
    """Every accepted change of the run up to iteration it−1, by change key."""
    return {change_key(r, c.id): c for r in range(1, it) for c in _manifest(run, r)}


@dataclass
class JointRound:
    """Per task, the joint effects of every change the run's states differ in. A task's effects are
    computed once and kept until `forget` is told that the task got new trials (the round's only
    source of new evidence is its re-evaluator, whose caller says which tasks it ran)."""

    rd: _Round
    entries: dict[str, ChangeEntry]
    q: Callable[[ChangeEntry, str], float]  # prior P(change moved task)
    _cache: dict[str, dict[str, Effect]] = field(default_factory=dict)

    def states(self, task: str) -> list[tuple[frozenset[str], Counts]]:
        per = dict(self.rd.rp.ledger.obs.get(task, {}))
        ev = self.rd.ev
        if ev is not None:
            for tag in ev.tags:
                got = ev.have(task, tag)
                if got.n:
                    st = _state_of(self.rd, tag)
                    per[st] = per.get(st, Counts()) + got
        return list(per.items())

    def forget(self, tasks: list[str]) -> None:
        for t in tasks:
            self._cache.pop(t, None)

    def effects(self, task: str) -> dict[str, Effect]:
        hit = self._cache.get(task)
        if hit is not None:
            return hit
        states = self.states(task)
        logit = {}
        for k in {k for st, _ in states for k in st}:
            c = self.entries.get(k)
            if c is None:
                continue
            q = min(0.95, max(1e-4, self.q(c, task)))
            logit[k] = math.log(q / (1 - q))
        out = self._cache[task] = task_effects(states, logit, self.rd.prior)
        return out

    def changes(self, keys: list[str], n: int) -> dict[str, tuple[float, float, list[tuple[str, Effect]]]]:
        """Per change key: (mean, variance) of its effect on pass@1, and its per-task effects."""
        out: dict[str, tuple[float, float, list[tuple[str, Effect]]]] = {k: (0.0, 0.0, []) for k in keys}
        for t in self.rd.rp.tasks:
            for k, e in self.effects(t).items():
                if k in out:
                    m, v, rows = out[k]
                    rows.append((t, e))
                    out[k] = (m + e.mean / n, v + e.var / n ** 2, rows)
        return out
