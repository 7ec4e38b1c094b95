"""A simulated executor: the `Executor` protocol with no sandbox and no model.

Each trial passes with the probability the hidden world gives its task on the harness in the
spec's workspace folder (the change markers present there), and writes a real `result.json`
with the same `TrialResult` model as a real trial, last and atomically, so the scheduler,
resume, results.json and every report read it exactly like a real one. Outcomes are drawn
from a generator seeded by the trial folder and attempt, so a re-run of a missing trial is
reproducible and independent of the order trials run in.
"""

from __future__ import annotations

import hashlib
import os
import random
from typing import Sequence

from ahe.llm.types import Usage
from ahe.rollout.executor import OnEvent
from ahe.rollout.models import TrialResult, TrialSpec
from ahe.io import atomic_write_text
from ahe.runtime.trace import now_iso
from ahe.simulate.world import World, markers_in

TOKENS_PER_TRIAL = (20_000, 2_000)  # prompt, completion: a plausible agent trial, so budgets count
COST_PER_TRIAL = 0.05


class SimulatedExecutor:
    """Trials drawn from `world`; thousands per second (one small file write each). It never loads
    the harness, so the scheduler skips the workspace-load probe (a confined worker, ~0.6 s a round)."""

    loads_harness = False

    def __init__(self, world: World, *, salt: str = "") -> None:
        self.world = world
        self.salt = salt
        self.trials_run = 0

    def outcome(self, spec: TrialSpec, markers: set[str]) -> bool:
        path = spec.trial_dir.as_posix()
        where = path[path.rfind("/iterations/"):] if "/iterations/" in path else path  # same draws for every policy
        key = f"{self.world.seed}:{self.salt}:{where}:{spec.attempt}"
        u = random.Random(hashlib.blake2b(key.encode(), digest_size=8).digest()).random()
        return u < self.world.p(spec.task_name, markers)

    async def run(self, specs: Sequence[TrialSpec], *, on_event: OnEvent | None = None) -> list[TrialResult | None]:
        markers: dict[str, set[str]] = {}
        out: list[TrialResult | None] = []
        for spec in specs:
            ws = str(spec.workspace)
            if ws not in markers:  # the harness content of this workspace, read once per batch
                markers[ws] = markers_in(spec.workspace)
            if on_event:
                on_event("start", spec, None)
            passed = self.outcome(spec, markers[ws])
            res = TrialResult(
                task=spec.task_name,
                trial=spec.trial,
                attempt=spec.attempt,
                reward=1.0 if passed else 0.0,
                raw_reward=1.0 if passed else 0.0,
                rewards={"reward": 1.0 if passed else 0.0},
                passed=passed,
                stop_reason="simulated",
                turns=1,
                usage=Usage(prompt_tokens=TOKENS_PER_TRIAL[0], completion_tokens=TOKENS_PER_TRIAL[1], cost_usd=COST_PER_TRIAL),
                started_at=now_iso(),
            )
            os.makedirs(spec.trial_dir, exist_ok=True)  # a new folder: made before the write tries it
            atomic_write_text(spec.trial_dir / "result.json", res.model_dump_json() + "\n")  # compact: thousands per run
            self.trials_run += 1
            if on_event:
                on_event("end", spec, res)
            out.append(res)
        return out
