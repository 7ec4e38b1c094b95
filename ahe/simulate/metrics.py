"""Decision accuracy: what a run decided, against the world's hidden truth.

- decision accuracy on changes with a real effect: a change whose true net effect on pass@1
  is positive should be kept, a negative one reverted;
- neutral kept: the share of changes with no effect that stayed in the harness (bloat);
- true pass@1 of H_best and of the final harness, and of the oracle harness (exactly the
  changes with a positive effect), all from the world's probabilities, not from trials;
- rollouts: every trial the run made, rounds and re-evaluations.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

from pydantic import BaseModel
from scipy import stats

from ahe.simulate.world import MARKER_DIR, World


class RunMetrics(BaseModel):
    seed: int
    policy: str
    real_changes: int
    real_correct: int
    neutral_changes: int
    neutral_kept: int
    best_true: float
    final_true: float
    oracle_true: float
    seed_true: float
    rollouts: int
    reeval_trials: int

    @property
    def accuracy(self) -> float | None:
        return self.real_correct / self.real_changes if self.real_changes else None

    @property
    def bloat(self) -> float | None:
        return self.neutral_kept / self.neutral_changes if self.neutral_changes else None


def _markers_at(workspace: Path, rev: str) -> set[str]:
    out = subprocess.run(["git", "-C", str(workspace), "ls-tree", "--name-only", f"{rev}:{MARKER_DIR}"],
                         capture_output=True, text=True)
    return {n[:-3] for n in out.stdout.split() if n.endswith(".md")} if out.returncode == 0 else set()


def measure(run_dir: Path, world: World, policy: str) -> RunMetrics:
    """The metrics of one finished run folder."""
    kept: dict[str, bool] = {}  # uid -> kept after its judgement
    for it_dir in sorted((run_dir / "iterations").iterdir()):
        man = it_dir / "evolve" / "manifest.json"
        if man.exists():
            for c in json.loads(man.read_text())["changes"]:
                if c["status"] == "accepted":
                    kept[Path(c["files"][0]).stem] = True  # until judged otherwise
    by_id: dict[tuple[int, str], str] = {}
    for it_dir in sorted((run_dir / "iterations").iterdir()):
        man = it_dir / "evolve" / "manifest.json"
        if man.exists():
            for c in json.loads(man.read_text())["changes"]:
                by_id[(int(it_dir.name), c["id"])] = Path(c["files"][0]).stem
    for it_dir in sorted((run_dir / "iterations").iterdir()):
        att = it_dir / "attribution.json"
        if att.exists():
            data = json.loads(att.read_text())
            for v in data["changes"] + data.get("rejudged", []):  # a deferred change judged again: its latest verdict
                made = v.get("change_iteration")
                uid = by_id.get((made if made is not None else int(it_dir.name) - 1, v["change_id"]))
                if uid:
                    kept[uid] = v["verdict"] != "rollback"
    real = [u for u in kept if world.changes[u].real]
    neutral = [u for u in kept if not world.changes[u].real]
    correct = sum(1 for u in real if kept[u] == (world.changes[u].net > 0))
    scores = json.loads((run_dir / "scores.json").read_text())
    ws = run_dir / "workspace"
    rollouts = sum(s["n_trials"] + s.get("reeval_trials", 0) for s in scores["iterations"])
    last_it = max(int(p.name) for p in (run_dir / "iterations").iterdir()) - 1
    return RunMetrics(
        seed=world.seed, policy=policy, real_changes=len(real), real_correct=correct,
        neutral_changes=len(neutral), neutral_kept=sum(1 for u in neutral if kept[u]),
        best_true=world.pass_at_1(_markers_at(ws, "best")),
        final_true=world.pass_at_1(_markers_at(ws, "final" if _has_tag(ws, "final") else "HEAD")),
        oracle_true=world.pass_at_1(world.oracle_markers(last_it)),
        seed_true=world.pass_at_1(set()),
        rollouts=rollouts, reeval_trials=sum(s.get("reeval_trials", 0) for s in scores["iterations"]),
    )


def _has_tag(ws: Path, tag: str) -> bool:
    return subprocess.run(["git", "-C", str(ws), "rev-parse", "-q", "--verify", f"refs/tags/{tag}"], capture_output=True).returncode == 0


def interval(xs: list[float]) -> tuple[float, float, float]:
    """Mean and the 95 % confidence interval of the mean over seeds (Student t)."""
    n = len(xs)
    m = sum(xs) / n if n else math.nan
    if n < 2:
        return m, m, m
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    h = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    return m, m - h, m + h


class PolicyRow(BaseModel):
    policy: str
    seeds: int
    accuracy: tuple[float, float, float]  # pooled per seed: correct / real changes
    bloat: tuple[float, float, float]
    best_gap: tuple[float, float, float]  # oracle − H_best, in pass@1 points
    final_gap: tuple[float, float, float]
    best_true: tuple[float, float, float]
    oracle_true: tuple[float, float, float]
    rollouts: tuple[float, float, float]
    rollouts_vs_paper: float | None = None


def table(metrics: list[RunMetrics]) -> list[PolicyRow]:
    rows = []
    policies = list(dict.fromkeys(m.policy for m in metrics))
    for p in policies:
        ms = [m for m in metrics if m.policy == p]
        rows.append(PolicyRow(
            policy=p, seeds=len(ms),
            accuracy=interval([m.accuracy for m in ms if m.accuracy is not None]),
            bloat=interval([m.bloat for m in ms if m.bloat is not None]),
            best_gap=interval([100 * (m.oracle_true - m.best_true) for m in ms]),
            final_gap=interval([100 * (m.oracle_true - m.final_true) for m in ms]),
            best_true=interval([m.best_true for m in ms]),
            oracle_true=interval([m.oracle_true for m in ms]),
            rollouts=interval([float(m.rollouts) for m in ms]),
        ))
    paper = next((r for r in rows if r.policy == "paper"), None)
    for r in rows:
        if paper:
            r.rollouts_vs_paper = r.rollouts[0] / paper.rollouts[0]
    return rows
