"""Verdict policies: how a change's evidence becomes keep, rollback or inconclusive.

One method, in the spirit of GEPA's `AcceptanceCriterion`: a policy looks at one accepted
change and the evidence of its round (`RoundEvidence`: per-task successes/trials before and
after, the δ-flips, every change of the round) and returns a `ChangeVerdict` with its reason.
The config's `attribution.strictness` names the policy.

Built in (docs/attribution.md):

- `paper` — the paper's δ-flip rule (the default; `balanced` is its old name): a change
  *holds* when one of its predicted fixes improved; `rollback` when it does not hold and
  some task regressed, or when more of its predicted risks happened than its fixes held.
- `lenient` — as `paper`, without the net-loss rule.
- `strict` — `keep` only when a predicted fix improved and nothing regressed at all.
- `keep-everything` — every change is kept (the paper's reference code never reverts).
- `noise` — a statistical judgement with targeted re-evaluation (`ahe.evolution.noise`,
  docs/decisions.md). It judges a whole round at once (`RoundPolicy`), because it runs trials
  and pins each movement on one change by evidence.

A regression the change's replay foresaw (`RoundEvidence.pinned_by_replay`, docs/foresight.md)
counts as one of that change's materialised risks. Regressions nobody predicted and no replay
touched cannot be pinned on one change by these rules, so they count against every change
whose own predictions did not hold (under `strict`, against every change).

Policies are leaves: none imports the registry or the loop. `ahe.evolution.registry` registers
the built-in ones; adding a policy is one class plus one registration,
`ahe.evolution.registry.register_policy(MyPolicy())` (in a plugin module named by AHE_PLUGINS or
an `ahe.plugins` entry point).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from ahe.harness.manifest import ChangeEntry
from ahe.run_folder.decisions import ChangeVerdict, Verdict


class TaskEvidence(BaseModel):
    """One task's outcomes on the harness before and after the round's changes.

    Rates are always known; the counts behind them are None when the caller had only rates
    (a statistical policy needs them: 1/2 and 50/100 are not the same evidence).
    """

    task: str
    before_rate: float
    after_rate: float
    before_passed: int | None = None
    before_trials: int | None = None
    after_passed: int | None = None
    after_trials: int | None = None


class RoundEvidence(BaseModel):
    """Everything a policy may look at when judging the changes of one round."""

    iteration: int
    delta: float
    tasks: dict[str, TaskEvidence] = Field(default_factory=dict)
    improved: list[str] = Field(default_factory=list)  # δ-flips up
    regressed: list[str] = Field(default_factory=list)  # δ-flips down
    changes: list[ChangeEntry] = Field(default_factory=list)  # every accepted change of the round
    unpredicted_regressions: list[str] = Field(default_factory=list)  # nobody predicted, no replay touched
    pinned_by_replay: dict[str, list[str]] = Field(default_factory=dict)  # regressed task -> ids whose replay touched it

    def replay_hits(self, change: ChangeEntry) -> list[str]:
        """Regressions pinned on `change` by its replay that it did not predict itself."""
        return sorted(t for t, ids in self.pinned_by_replay.items()
                      if change.id in ids and t not in change.predicted_regressions)


@runtime_checkable
class VerdictPolicy(Protocol):
    name: str

    def judge(self, change: ChangeEntry, evidence: RoundEvidence) -> ChangeVerdict:
        """The verdict on `change`, with a reason a reviewer can check against the evidence."""
        ...


class _FlipRule:
    """The δ-flip rules of the paper and its two variants (they differ in two switches)."""

    def __init__(self, name: str, *, net_loss: bool, strict: bool) -> None:
        self.name = name
        self.net_loss = net_loss  # rollback when more predicted risks happened than fixes held
        self.strict = strict  # keep only when nothing regressed anywhere

    def judge(self, change: ChangeEntry, evidence: RoundEvidence) -> ChangeVerdict:
        improved, regressed = set(evidence.improved), set(evidence.regressed)
        fixes_ok = [t for t in change.predicted_fixes if t in improved]
        fixes_missed = [t for t in change.predicted_fixes if t not in improved]
        predicted_hit = [t for t in change.predicted_regressions if t in regressed]
        replay_hit = evidence.replay_hits(change)
        risks_hit = predicted_hit + replay_hit  # the change's risks that materialised, foreseen either way
        holds = bool(fixes_ok)
        reasons: list[str] = []
        if change.predicted_fixes and not holds:
            reasons.append("predicted fix did not improve")
        if predicted_hit:
            reasons.append("predicted regression of " + ", ".join(predicted_hit))
        if replay_hit:
            reasons.append("regression of " + ", ".join(replay_hit) + " foreseen by replay")
        blamed = evidence.unpredicted_regressions if (not holds or self.strict) else []
        if blamed:
            reasons.append("unpredicted regression of " + ", ".join(blamed))
        any_regression = bool(risks_hit or blamed)

        if self.strict:
            ok = holds and not any_regression and not evidence.unpredicted_regressions
            verdict: Verdict = "keep" if ok else "rollback"
        elif not holds:
            verdict = "rollback" if any_regression else "inconclusive"
        elif self.net_loss and len(risks_hit) > len(fixes_ok):
            verdict = "rollback"
            reasons.append(f"{len(risks_hit)} predicted risks happened against {len(fixes_ok)} fixes")
        else:
            verdict = "keep"
        if verdict == "keep":
            reasons.insert(0, "predicted fix improved: " + ", ".join(fixes_ok))
        elif verdict == "inconclusive" and not reasons:
            reasons.append("predicted nothing measurable" if not change.predicted_fixes else "no effect either way")
        elif verdict == "inconclusive":
            reasons.append("nothing regressed")
        return ChangeVerdict(
            change_id=change.id,
            commit=change.commit,
            component=change.component,
            verdict=verdict,
            reason="; ".join(reasons),
            predicted_fixes=list(change.predicted_fixes),
            fixes_improved=fixes_ok,
            fixes_not_improved=fixes_missed,
            predicted_regressions=list(change.predicted_regressions),
            regressions_happened=predicted_hit,
            unpredicted_regressions=list(blamed),
            replay_at_risk=list(change.replay_at_risk),
            replay_regressions=replay_hit,
        )


class _KeepEverything:
    name = "keep-everything"

    def judge(self, change: ChangeEntry, evidence: RoundEvidence) -> ChangeVerdict:
        return ChangeVerdict(
            change_id=change.id, commit=change.commit, component=change.component, verdict="keep",
            reason="keep-everything: the reference code never reverts",
            predicted_fixes=list(change.predicted_fixes),
            fixes_improved=[t for t in change.predicted_fixes if t in evidence.improved],
            fixes_not_improved=[t for t in change.predicted_fixes if t not in evidence.improved],
            predicted_regressions=list(change.predicted_regressions),
            regressions_happened=[t for t in change.predicted_regressions if t in evidence.regressed],
            unpredicted_regressions=[],
        )


PAPER = _FlipRule("paper", net_loss=True, strict=False)
LENIENT = _FlipRule("lenient", net_loss=False, strict=False)
STRICT = _FlipRule("strict", net_loss=False, strict=True)
KEEP_EVERYTHING = _KeepEverything()
