"""The hidden world of one seed: each task's base success probability and every scripted
change's true effect. Nothing here is visible to the loop; the executor and the metrics read it.

A change lives in the harness as one marker file `sim/<uid>.md`; a task's success
probability on a harness is a function of the markers present in that harness's files:

    p(task | markers) = base + Σ losses + min(Σ gains, max(0, cap − base))

so gains on one task do not add up past the cap (the non-additive interaction), and a git
revert of a change really changes outcomes. The change stream depends on the seed and the
iteration only, so every policy sees exactly the same changes on the same seed.
"""

from __future__ import annotations

import random
from pathlib import Path

from pydantic import BaseModel, Field

from ahe.simulate.scenario import EffectKind, Scenario

MARKER_DIR = "sim"


class TrueChange(BaseModel):
    uid: str  # the marker file's stem
    iteration: int
    index: int
    kind: EffectKind
    effects: dict[str, float] = Field(default_factory=dict)  # task -> change of its success probability
    predicted_fixes: list[str] = Field(default_factory=list)
    predicted_regressions: list[str] = Field(default_factory=list)
    net: float = 0.0  # true change of pass@1 on the seed harness (÷ number of tasks)

    @property
    def marker(self) -> str:
        return f"{MARKER_DIR}/{self.uid}.md"

    @property
    def real(self) -> bool:
        """A change with a real effect: keeping it is right exactly when `net` > 0."""
        return bool(self.effects) and abs(self.net) > 1e-9


class World(BaseModel):
    seed: int
    cap: float
    base: dict[str, float]
    changes: dict[str, TrueChange] = Field(default_factory=dict)  # uid -> change

    def p(self, task: str, markers: set[str]) -> float:
        base = self.base[task]
        gains = losses = 0.0
        for uid in markers:
            c = self.changes.get(uid)
            d = c.effects.get(task, 0.0) if c else 0.0
            if d > 0:
                gains += d
            else:
                losses += d
        return min(1.0, max(0.0, base + losses + min(gains, max(0.0, self.cap - base))))

    def pass_at_1(self, markers: set[str]) -> float:
        return sum(self.p(t, markers) for t in self.base) / len(self.base)

    def oracle_markers(self, upto_iteration: int | None = None) -> set[str]:
        """Exactly the changes whose true effect is positive (the oracle harness)."""
        return {u for u, c in self.changes.items() if c.net > 1e-9 and (upto_iteration is None or c.iteration <= upto_iteration)}


def task_names(n: int) -> list[str]:
    width = max(3, len(str(n)))
    return [f"sim-task-{i:0{width}d}" for i in range(1, n + 1)]


def make_world(sc: Scenario, seed: int) -> World:
    """Base probabilities and the whole change stream of one seed (deterministic)."""
    rng = random.Random(f"ahe-sim-world:{seed}")
    tm = sc.tasks
    names = task_names(tm.count)
    n_flaky = round(tm.flaky_share * tm.count)
    flaky_mean = sum(tm.flaky_range) / 2
    hi, lo = sum(tm.solid_pass) / 2, sum(tm.solid_fail) / 2
    rest = tm.count - n_flaky
    # share of solid passes among the non-flaky tasks so that the mean is pass_at_1
    want = (tm.pass_at_1 * tm.count - n_flaky * flaky_mean) / rest if rest else 0.0
    n_pass = min(rest, max(0, round(rest * (want - lo) / (hi - lo)))) if hi > lo else rest
    kinds = ["flaky"] * n_flaky + ["pass"] * n_pass + ["fail"] * (rest - n_pass)
    rng.shuffle(kinds)
    ranges = {"flaky": tm.flaky_range, "pass": tm.solid_pass, "fail": tm.solid_fail}
    base = {t: round(rng.uniform(*ranges[k]), 4) for t, k in zip(names, kinds)}
    world = World(seed=seed, cap=sc.changes.effects.cap, base=base)
    for it in range(1, sc.iterations + 1):
        lo_n, hi_n = sc.changes.per_iteration
        for j in range(rng.randint(lo_n, hi_n)):
            c = _make_change(sc, rng, base, it, j)
            world.changes[c.uid] = c
            c.net = sum(world.p(t, {c.uid}) - base[t] for t in c.effects) / len(base)
    return world


def _make_change(sc: Scenario, rng: random.Random, base: dict[str, float], it: int, j: int) -> TrueChange:
    em = sc.changes.effects
    kinds = list(em.weights)
    kind: EffectKind = rng.choices(kinds, weights=[em.weights[k] for k in kinds])[0]
    can_gain = [t for t, p in base.items() if p < 0.9]  # what the agent would try to fix
    can_lose = [t for t, p in base.items() if p > 0.3]
    effects: dict[str, float] = {}
    n_gain = {"beneficial": rng.randint(*em.beneficial_tasks), "mixed": rng.randint(1, 2)}.get(kind, 0)
    n_loss = {"harmful": rng.randint(*em.harmful_tasks), "mixed": rng.randint(1, 2)}.get(kind, 0)
    for t in rng.sample(can_gain, min(n_gain, len(can_gain))):
        effects[t] = round(rng.uniform(*em.gain), 4)
    for t in rng.sample([t for t in can_lose if t not in effects], min(n_loss, len(can_lose))):
        effects[t] = -round(min(base[t], rng.uniform(*em.loss)), 4)
    uid = f"c{it:03d}-{j + 1}-{rng.getrandbits(32):08x}"
    c = TrueChange(uid=uid, iteration=it, index=j, kind=kind, effects=effects)
    _predict(sc, rng, c, can_gain, can_lose)
    return c


def _expected_true(sc: Scenario, gain: bool) -> float:
    """Mean number of tasks a change truly helps (or hurts), over the effect mix."""
    em = sc.changes.effects
    total = sum(em.weights.values())
    rng_ = em.beneficial_tasks if gain else em.harmful_tasks
    main = "beneficial" if gain else "harmful"
    return (em.weights.get(main, 0) * sum(rng_) / 2 + em.weights.get("mixed", 0) * 1.5) / total


def _predict(sc: Scenario, rng: random.Random, c: TrueChange, can_gain: list[str], can_lose: list[str]) -> None:
    """Manifest predictions with the scenario's expected precision and recall."""
    mq = sc.manifests
    helped = [t for t, d in c.effects.items() if d > 0]
    hurt = [t for t, d in c.effects.items() if d < 0]
    fixes = [t for t in helped if rng.random() < mq.fix_recall]
    lam = _expected_true(sc, True) * mq.fix_recall * (1 - mq.fix_precision) / mq.fix_precision
    fixes += rng.sample([t for t in can_gain if t not in helped], min(_poisson(rng, lam), len(can_gain) - len(helped)))
    if not fixes:  # an agent always claims its change fixes something
        fixes = rng.sample([t for t in can_gain if t not in helped], 1)
    regs = [t for t in hurt if rng.random() < mq.regression_recall]
    lam_r = _expected_true(sc, False) * mq.regression_recall * (1 - mq.regression_precision) / mq.regression_precision
    pool = [t for t in can_lose if t not in hurt and t not in fixes]
    regs += rng.sample(pool, min(_poisson(rng, lam_r), len(pool)))
    c.predicted_fixes, c.predicted_regressions = sorted(fixes), sorted(regs)


def _poisson(rng: random.Random, lam: float) -> int:
    import math

    k, p, target = 0, 1.0, math.exp(-lam)
    while True:
        p *= rng.random()
        if p <= target:
            return k
        k += 1


def markers_in(workspace: Path) -> set[str]:
    """The change markers present in a harness folder (what the simulated executor reads)."""
    d = Path(workspace) / MARKER_DIR
    try:
        return {p.name[:-3] for p in d.iterdir() if p.name.endswith(".md")}
    except OSError:
        return set()
