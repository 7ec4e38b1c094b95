"""Schemas of the run-level bookkeeping files: loop_state.json (resume) and scores.json."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ahe.runtime.trace import now_iso

# "explore" runs only in iteration 1 when the config has explore sources (docs/explore.md);
# elsewhere it is marked done at once, so older loop states resume unchanged.
PHASES = ("rollout", "attribution", "rollback", "debug", "explore", "evolve")


class LoopState(BaseModel):
    """loop_state.json: which phases are finished, and the harness commit each phase began at.

    A finished phase is never redone. A phase that was started but not finished is redone
    from its recorded starting commit (so a half-done evolve or rollback leaves no trace).
    """

    started_at: str = Field(default_factory=now_iso)
    elapsed_sec: float = 0.0  # wall time of previous sessions of this run (for budgets)
    done: dict[str, list[str]] = Field(default_factory=dict)  # "003" -> ["rollout", ...]
    phase_base: dict[str, str] = Field(default_factory=dict)  # "003/evolve" -> commit
    stopped: str | None = None  # why the loop ended (budget, target, finished)
    finished: bool = False

    def is_done(self, it: int, phase: str) -> bool:
        return phase in self.done.get(f"{it:03d}", [])

    def mark(self, it: int, phase: str) -> None:
        self.done.setdefault(f"{it:03d}", []).append(phase)


class IterationScore(BaseModel):
    iteration: int
    harness_commit: str | None
    harness_tag: str | None
    pass_at_1: float
    pass_at_k: float
    k: int
    n_trials: int
    n_passed: int
    infra_errors: int
    reeval_trials: int = 0  # targeted re-evaluation trials of this iteration's attribution (noise policy)
    tokens: dict[str, int] = Field(default_factory=dict)  # per role
    variant_tokens: int = 0  # of tokens["agent"]: the variants' evaluation in this iteration's evolve phase
    variant_cost_usd: float = 0.0  # of cost_usd["agent"]: the same
    cost_usd: dict[str, float] = Field(default_factory=dict)  # per role
    timings_sec: dict[str, float] = Field(default_factory=dict)  # per phase
    kept: list[str] = Field(default_factory=list)
    rolled_back: list[str] = Field(default_factory=list)
    final: bool = False
    metric_value: float | None = None  # the run's value of the experiment's metric (pass@1 by default)
    reward_means: dict[str, float] = Field(default_factory=dict)  # mean of each reward key (results.json)
    benchmark_hash: str | None = None  # the sealed tasks this rollout ran on (results.json, ahe.tasks.snapshot)
    # what each phase added, "evolve/agent" -> [tokens, dollars] ("evolve/variants": the variants' part)
    spent_by_phase: dict[str, list[float]] = Field(default_factory=dict)

    def add_spend(self, phase: str, role: str, tokens: int, cost_usd: float) -> None:
        """Add a phase's spend of a role once: a phase redone after a kill between saving its spend
        and being marked done replaces what its first run added (it counts its redo, as a phase
        killed anywhere else does). `role` "variants" is the variants' part of the agent's spend."""
        key = f"{phase}/{role}"
        old_tokens, old_cost = self.spent_by_phase.get(key, [0, 0.0])
        if role == "variants":
            self.variant_tokens += tokens - int(old_tokens)
            self.variant_cost_usd += cost_usd - old_cost
        else:
            self.tokens[role] = self.tokens.get(role, 0) + tokens - int(old_tokens)
            self.cost_usd[role] = self.cost_usd.get(role, 0.0) + cost_usd - old_cost
        self.spent_by_phase[key] = [tokens, cost_usd]


class Scores(BaseModel):
    iterations: list[IterationScore] = Field(default_factory=list)
    best_iteration: int | None = None
    best_commit: str | None = None
    best_pass_at_1: float | None = None
    metric: str = "pass_rate"  # what H_best is chosen by
    best_metric_value: float | None = None

    def get(self, it: int) -> IterationScore | None:
        return next((s for s in self.iterations if s.iteration == it), None)

    def upsert(self, score: IterationScore) -> None:
        self.iterations = [s for s in self.iterations if s.iteration != score.iteration] + [score]
        self.iterations.sort(key=lambda s: s.iteration)

    def totals(self) -> dict[str, dict[str, float]]:
        tokens: dict[str, float] = {}
        cost: dict[str, float] = {}
        for s in self.iterations:
            for role, n in s.tokens.items():
                tokens[role] = tokens.get(role, 0) + n
            for role, c in s.cost_usd.items():
                cost[role] = cost.get(role, 0.0) + c
        tokens["total"] = sum(v for k, v in tokens.items() if k != "total")
        cost["total"] = sum(v for k, v in cost.items() if k != "total")
        return {"tokens": tokens, "cost_usd": cost}
