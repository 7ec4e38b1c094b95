"""The decision simulator and the noise-aware policy, through the real loop (git, files, gate).

Worlds are built by hand here so the true effects are known and strong; the default scenario
is measured by `ahe simulate` itself (docs/decisions.md), not in the suite.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ahe.config import AttributionSettings, DebuggerSettings, ExperimentConfig
from ahe.evolution.attribution import attribute
from ahe.evolution.loop import EvolutionLoop, SEED_DEFAULT
from ahe.harness.repo import HarnessRepo
from ahe.rollout.models import TrialSpec
from ahe.simulate.evolve import ScriptedEvolve
from ahe.simulate.executor import SimulatedExecutor
from ahe.simulate.runner import write_tasks
from ahe.simulate.scenario import Scenario, load_scenario
from ahe.simulate.world import TrueChange, World, make_world, task_names
from ahe.errors import ConfigError


def _world(n_tasks: int = 16) -> World:
    """Iteration 1: a strongly beneficial change (3 tasks 0.02 → 0.97) and a neutral one;
    iteration 2: a strongly harmful change (2 tasks 0.98 → 0.03) that predicts a fix that never comes."""
    names = task_names(n_tasks)
    base = {t: (0.02 if i < 6 else 0.98) for i, t in enumerate(names)}
    w = World(seed=7, cap=0.97, base=base)
    good = TrueChange(uid="c001-1-good", iteration=1, index=0, kind="beneficial",
                      effects={t: 0.95 for t in names[:3]}, predicted_fixes=[names[0], names[4]])
    idle = TrueChange(uid="c001-2-idle", iteration=1, index=1, kind="neutral", predicted_fixes=[names[5]])
    bad = TrueChange(uid="c002-1-bad", iteration=2, index=0, kind="harmful",
                     effects={names[10]: -0.95, names[11]: -0.95}, predicted_fixes=[names[3]])
    for c in (good, idle, bad):
        w.changes[c.uid] = c
        c.net = sum(w.p(t, {c.uid}) - base[t] for t in c.effects) / n_tasks
    return w


def _loop(tmp: Path, world: World, policy: str, executor: SimulatedExecutor | None = None, *, iterations: int = 2,
          reeval_share: float = 0.5) -> EvolutionLoop:
    tasks = write_tasks(tmp / "tasks", len(world.base))
    cfg = ExperimentConfig(tasks=tasks, iterations=iterations, k=2, concurrency=1, retry_infra=0,
                           attribution=AttributionSettings(strictness=policy, reeval_share=reeval_share),
                           debugger=DebuggerSettings(enabled=False))
    return EvolutionLoop(cfg, tmp / f"run-{policy}", executor=executor or SimulatedExecutor(world), evolve=ScriptedEvolve(world))


def _run(loop: EvolutionLoop, *, resume: bool = False) -> None:
    repo = loop.prepare(resume=resume)
    asyncio.run(loop.run_loop(repo, {}))


def _verdicts(run: Path) -> dict[str, str]:
    """Each change's standing verdict (a deferred one's latest re-judgement)."""
    out = {}
    for att in sorted(run.glob("iterations/*/attribution.json")):
        data = json.loads(att.read_text())
        for v in data["changes"] + data.get("rejudged", []):
            made = v["change_iteration"] if v.get("change_iteration") is not None else data["iteration"] - 1
            man = json.loads((run / "iterations" / f"{made:03d}" / "evolve" / "manifest.json").read_text())
            uid = {c["id"]: Path(c["files"][0]).stem for c in man["changes"]}
            out[uid[v["change_id"]]] = v["verdict"]
    return out


def test_outcomes_follow_the_workspace_content_and_a_revert_changes_them(tmp_path: Path) -> None:
    w = World(seed=1, cap=1.0, base={"sim-task-001": 0.0})
    w.changes["fix"] = TrueChange(uid="fix", iteration=1, index=0, kind="beneficial", effects={"sim-task-001": 1.0})
    repo = HarnessRepo.create(tmp_path / "ws", SEED_DEFAULT)
    (tmp_path / "ws" / "sim").mkdir()
    (tmp_path / "ws" / "sim" / "fix.md").write_text("marker\n")
    commit = repo.commit_paths(["sim/fix.md"], "the fix")
    ex = SimulatedExecutor(w)

    def passes(round_: str) -> int:
        specs = [TrialSpec(task_dir=tmp_path, task_name="sim-task-001", trial=n, trial_dir=tmp_path / round_ / f"trial-{n}",
                           workspace=tmp_path / "ws") for n in range(1, 21)]
        results = asyncio.run(ex.run(specs))
        assert all((s.trial_dir / "result.json").exists() for s in specs)  # real result files, same model
        return sum(r.passed for r in results if r)

    assert passes("with") == 20
    repo.revert(commit, "revert the fix")
    assert passes("without") == 0
    assert ex.trials_run == 40


def test_noise_policy_keeps_the_strong_fix_and_reverts_the_harm_and_the_bloat(tmp_path: Path) -> None:
    world = _world()
    loop = _loop(tmp_path, world, "noise")
    _run(loop)
    v = _verdicts(loop.run.root)
    assert v == {"c001-1-good": "keep", "c001-2-idle": "rollback", "c002-1-bad": "rollback"}
    att = json.loads((loop.run.root / "iterations" / "002" / "attribution.json").read_text())
    assert att["strictness"] == "noise"
    good = next(c for c in att["changes"] if c["verdict"] == "keep")
    assert good["confidence"] >= 0.9 and set(good["touched_tasks"]) <= {"sim-task-001", "sim-task-002", "sim-task-003"}
    ev = {e["task"]: e for e in att["evidence"]}
    assert ev["sim-task-001"]["movement"] == "up" and ev["sim-task-001"]["attributed_to"] == [good["change_id"]]
    # the final harness holds exactly the beneficial change, and H_best is it
    ws = loop.run.workspace
    markers = subprocess.run(["git", "-C", str(ws), "ls-tree", "--name-only", "final:sim"], capture_output=True, text=True).stdout.split()
    assert markers == ["c001-1-good.md"]
    scores = json.loads((loop.run.root / "scores.json").read_text())
    best = subprocess.run(["git", "-C", str(ws), "ls-tree", "--name-only", f"{scores['best_commit']}:sim"],
                          capture_output=True, text=True).stdout.split()
    assert world.pass_at_1({m[:-3] for m in best}) == world.pass_at_1({"c001-1-good"})  # H_best is as good as the oracle
    assert sum(s["reeval_trials"] for s in scores["iterations"]) > 0
    assert scores["totals"]["tokens"].get("reeval", 0) > 0


class _Killed(Exception):
    pass


class _KillAfter(SimulatedExecutor):
    """Dies like a SIGKILL after `limit` re-evaluation trials (rounds run normally)."""

    def __init__(self, world: World, limit: int, only: str = "") -> None:
        super().__init__(world)
        self.limit, self.reevals, self.only = limit, 0, only  # `only`: count trials whose harness tag starts so

    async def run(self, specs, *, on_event=None):  # type: ignore[override]
        if specs and "reeval" in specs[0].trial_dir.parts and specs[0].trial_dir.parent.name.startswith(self.only):
            room = self.limit - self.reevals
            if len(specs) > room:  # the first `room` trials finish, then the process dies
                await super().run(specs[:room], on_event=on_event)
                raise _Killed()
            self.reevals += len(specs)
        return await super().run(specs, on_event=on_event)


class _Recording(SimulatedExecutor):
    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.ran: list[Path] = []

    async def run(self, specs, *, on_event=None):  # type: ignore[override]
        self.ran += [s.trial_dir for s in specs]
        return await super().run(specs, on_event=on_event)


def test_reevaluation_resumes_after_a_kill_and_never_reruns_a_finished_trial(tmp_path: Path) -> None:
    world = _world()
    whole = _loop(tmp_path / "a", world, "noise", iterations=1)
    _run(whole)
    killed = _loop(tmp_path / "b", world, "noise", _KillAfter(world, limit=3), iterations=1)
    with pytest.raises(_Killed):
        _run(killed)
    run = killed.run.root
    finished = {p.parent for p in run.glob("iterations/*/reeval/*/*/trial-*/result.json")}
    assert finished, "the kill came after some re-evaluation trials had finished"
    rec = _Recording(world)
    again = _loop(tmp_path / "b", world, "noise", rec, iterations=1)
    _run(again, resume=True)
    assert not finished & set(rec.ran)
    strip = lambda p: json.loads(p.read_text())["changes"]  # noqa: E731
    a = whole.run.root / "iterations" / "002" / "attribution.json"
    b = run / "iterations" / "002" / "attribution.json"
    assert [(c["change_id"], c["verdict"]) for c in strip(a)] == [(c["change_id"], c["verdict"]) for c in strip(b)]
    reeval = json.loads((run / "iterations" / "002" / "reeval.json").read_text())
    assert reeval["spent"] == json.loads((whole.run.root / "iterations" / "002" / "reeval.json").read_text())["spent"]


def _lucky_world() -> World:
    """One change that truly hurts (a fix to 0.52 on one task, a 0.98 → 0.08 break on another);
    on seed 5 its round is lucky: raw pass@1 and the round's pooled evidence both rate it best."""
    names = task_names(16)
    base = {t: (0.02 if i < 6 else 0.98) for i, t in enumerate(names)}
    w = World(seed=5, cap=0.97, base=base)
    c = TrueChange(uid="c001-1-lucky", iteration=1, index=0, kind="mixed", effects={names[0]: 0.5, names[10]: -0.9},
                   predicted_fixes=[names[0]])
    w.changes[c.uid] = c
    return w


def _best(run: Path) -> tuple[dict, dict]:
    decision = json.loads((run / "iterations" / "002" / "reeval.json").read_text())["best"]
    return decision, {c["commit"]: c["state"] for c in decision["candidates"]}


def test_hbest_reevaluates_a_close_lead_and_a_lucky_round_does_not_win(tmp_path: Path) -> None:
    world = _lucky_world()
    loop = _loop(tmp_path, world, "noise", iterations=1, reeval_share=2.0)
    _run(loop)
    run = loop.run.root
    scores = json.loads((run / "scores.json").read_text())
    raw = {s["iteration"]: s["pass_at_1"] for s in scores["iterations"]}
    assert raw[2] > raw[1]  # by raw pass@1 the round of the harmful change wins
    decision, states = _best(run)
    assert states[decision["leader_before"]] == ["001/chg-1"]  # so does the pooled evidence before re-evaluation
    assert decision["reeval_tasks"] == ["sim-task-001", "sim-task-011"] and decision["spent"] > 0
    assert len(list(run.glob("iterations/002/reeval/*/hbest-002-*/trial-*/result.json"))) == decision["spent"]
    assert states[decision["best_commit"]] == [] and decision["p_lead"] > 0.5
    assert world.pass_at_1(set()) > world.pass_at_1({"c001-1-lucky"})  # the declared best is truly better
    assert scores["best_commit"] == decision["best_commit"]
    att = json.loads((run / "iterations" / "002" / "reeval.json").read_text())
    assert scores["iterations"][1]["reeval_trials"] == att["spent"] + decision["spent"]
    shown = subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(run)], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "H_best" in shown.stdout and "sim-task-011" in shown.stdout
    report = subprocess.run([sys.executable, "-m", "ahe.cli", "report", str(run)], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0 and 'id="best-decision"' in (run / "report.html").read_text()


def test_hbest_reevaluation_resumes_after_a_kill(tmp_path: Path) -> None:
    world = _lucky_world()
    whole = _loop(tmp_path / "a", world, "noise", iterations=1, reeval_share=2.0)
    _run(whole)
    killed = _loop(tmp_path / "b", world, "noise", _KillAfter(world, limit=7, only="hbest-"), iterations=1, reeval_share=2.0)
    with pytest.raises(_Killed):  # dies in the middle of H_best's second batch of re-evaluation trials
        _run(killed)
    run = killed.run.root
    finished = {p.parent for p in run.glob("iterations/002/reeval/*/hbest-*/trial-*/result.json")}
    assert len(finished) == 7 and json.loads((run / "iterations" / "002" / "reeval.json").read_text())["best"] is None
    rec = _Recording(world)
    _run(_loop(tmp_path / "b", world, "noise", rec, iterations=1, reeval_share=2.0), resume=True)
    assert not finished & set(rec.ran)
    (a, sa), (b, sb) = _best(whole.run.root), _best(run)
    assert (sa[a["best_commit"]], a["spent"], a["p_lead"]) == (sb[b["best_commit"]], b["spent"], b["p_lead"])


def test_paper_is_todays_balanced_rule(tmp_path: Path) -> None:
    from ahe.harness.manifest import ChangeEntry

    c = ChangeEntry(id="chg-1", component="skill", files=["a"], summary="a change", root_cause="why it failed",
                    targeted_fix="the fix", predicted_fixes=["x"], predicted_regressions=["y", "z"], commit="abc")
    before, after = {"x": 0.0, "y": 1.0, "z": 1.0, "w": 0.5}, {"x": 1.0, "y": 0.0, "z": 0.0, "w": 0.5}
    a = attribute([c], before, after, iteration=2, strictness="balanced")
    b = attribute([c], before, after, iteration=2, strictness="paper")
    assert [v.model_dump() for v in a.changes] == [v.model_dump() for v in b.changes]
    assert b.changes[0].verdict == "rollback"  # two predicted risks happened against one fix
    keep_all = attribute([c], before, after, iteration=2, strictness="keep-everything")
    assert keep_all.changes[0].verdict == "keep"


def test_default_scenario_matches_the_issue() -> None:
    sc = Scenario()
    assert (sc.tasks.count, sc.k, sc.seeds, sc.tasks.flaky_share) == (89, 2, 50, 0.15)
    w = make_world(sc, 0)
    flaky = [p for p in w.base.values() if 0.2 <= p <= 0.8]
    assert len(flaky) == round(0.15 * 89)
    assert abs(w.pass_at_1(set()) - 0.70) < 0.03
    assert make_world(sc, 0) == w  # deterministic per seed


def test_a_wrong_scenario_field_is_one_sentence(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text("tasks:\n  count: one\n")
    with pytest.raises(ConfigError, match=r"s.yaml: field `tasks.count`"):
        load_scenario(p)


def test_ahe_simulate_prints_the_policy_table_and_leaves_run_folders(tmp_path: Path) -> None:
    sc = tmp_path / "small.yaml"
    sc.write_text("name: small\nseeds: 2\niterations: 2\ntasks:\n  count: 12\npolicies: [paper, noise]\n")
    out = tmp_path / "sim"
    p = subprocess.run([sys.executable, "-m", "ahe.cli", "simulate", "--scenario", str(sc), "--out", str(out), "--jobs", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "paper" in p.stdout and "noise" in p.stdout and "rollouts" in p.stdout
    data = json.loads((out / "table.json").read_text())
    assert [r["policy"] for r in data["rows"]] == ["paper", "noise"] and len(data["runs"]) == 4
    run = out / "seed-000" / "noise"
    assert (run / "scores.json").exists() and not (out / "seed-001" / "noise").exists()
    audit = subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(run)], capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0, audit.stderr
    shown = json.loads(subprocess.run([sys.executable, "-m", "ahe.cli", "audit", str(run), "--json"], capture_output=True,
                                      text=True, timeout=120).stdout)
    judged = [it for it in shown["iterations"] if it["policy"] == "noise"]
    assert judged and all(it["evidence"] and it["reeval"] is not None for it in judged)
    assert all(c["confidence"] is not None for it in judged for c in it["changes"])
    report = subprocess.run([sys.executable, "-m", "ahe.cli", "report", str(run)], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    assert "re-evaluation trials" in (run / "report.html").read_text()


def test_a_tiny_scenario_gives_the_same_metrics_every_time(tmp_path: Path) -> None:
    """The simulator is deterministic: the suite's worker gives the same metrics in any folder, and `paper`'s
    are pinned (a speed-up of git, files or the executor must not move a single number)."""
    from ahe.simulate.command import _one_seed

    sc = Scenario.model_validate({"name": "tiny", "seeds": 1, "iterations": 3, "k": 2, "tasks": {"count": 12},
                                  "policies": ["paper", "noise", "expected-value"]})
    first = _one_seed(sc.model_dump_json(), str(tmp_path / "a"), 5, False)
    again = _one_seed(sc.model_dump_json(), str(tmp_path / "b" / "elsewhere"), 5, True)
    assert first == again
    assert first[0] == {"seed": 5, "policy": "paper", "real_changes": 4, "real_correct": 2, "neutral_changes": 3,
                        "neutral_kept": 3, "seed_true": pytest.approx(0.7585833333333332, abs=1e-12),
                        "oracle_true": pytest.approx(0.972525, abs=1e-12), "best_true": pytest.approx(0.8680083333333334, abs=1e-12),
                        "final_true": pytest.approx(0.8680083333333334, abs=1e-12), "rollouts": 96, "reeval_trials": 0}
    assert [r["reeval_trials"] > 0 for r in first] == [False, True, True]
