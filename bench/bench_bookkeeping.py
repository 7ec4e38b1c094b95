"""Benchmark 3 — rollout bookkeeping of one iteration: 89 tasks × k=2 trials, no agent work.

    python bench/bench_bookkeeping.py                 # 89 tasks, k=2, 5 repeats
    python bench/bench_bookkeeping.py --tasks 5 --repeat 1             # smoke size

Everything an iteration does around the trials, through the real code paths of
`ahe.evolution.loop.EvolutionLoop` on a real run folder and a real git harness repository;
only the trials themselves are replaced by a synthetic executor that writes each trial's
result.json exactly as `ahe.rollout.trial.execute_trial` does (atomically, from a TrialResult):

  setup (not timed)  89 task folders, a run folder whose harness repo has iteration 1's five
                     accepted changes committed and whose iteration 1 is fully evaluated
  rollout            EvolutionLoop._run_phase("rollout") of iteration 2: plan (load the
                     workspace and the 89 tasks, scan for finished trials), harness.json
                     (git rev-parse, code hash), 178 result.json + events.jsonl lines,
                     summarize (pass@1, pass@k), results.json, scores.json, tag `best`, history
  attribution        _run_phase("attribution"): both results.json, the manifest of iteration 1,
                     verdicts with precision/recall, attribution.json, events, history
  rollback           _run_phase("rollback"): `git revert` of each change judged `rollback`
                     (2 of 5 here), rollback.json, scores, events, history
  evolve git         the git side of an evolve phase with 5 recorded changes: per change
                     changed_files, commit_paths, files_in_commit and the gate's show_file of
                     agent.yaml; then is_dirty, discard_uncommitted and the iteration tag
  resume scan        plan_rollouts over the finished iteration (what `--resume` reads), with the
                     check of every task folder against the run's seal from cold (a new process)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sys
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, median, table, write_result  # noqa: E402

PHASES = ["rollout", "attribution", "rollback", "evolve git", "resume scan"]


def make_tasks(root: Path, n: int) -> list[str]:
    names = []
    for i in range(n):
        name = f"task-{i:03d}"
        d = root / name
        (d / "tests").mkdir(parents=True)
        (d / "environment").mkdir()
        (d / "task.toml").write_text(f'[task]\nname = "{name}"\n\n[metadata]\ndifficulty = "easy"\ncategory = "bench"\n\n'
                                     '[agent]\ntimeout_sec = 600\n\n[verifier]\ntimeout_sec = 60\n')
        (d / "instruction.md").write_text(f"Synthetic task {i}: write the answer to /app/out.txt.\n")
        (d / "tests" / "test.sh").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
        (d / "environment" / "input.txt").write_text("data\n")
        names.append(name)
    return names


class SyntheticExecutor:
    """Stands in for the trials: writes result.json the way execute_trial does, at once."""

    def __init__(self, outcomes: dict[str, list[bool]], seed: int) -> None:
        self.outcomes = outcomes
        self.rng = random.Random(seed)

    async def run(self, specs: Sequence[Any], *, on_event: Any = None) -> list[Any]:
        from ahe.llm.types import Usage
        from ahe.rollout.models import TrialResult
        from ahe.rollout.trial import RESULT_FILE
        from ahe.runtime.trace import now_iso
        from ahe.io import atomic_write_json

        out = []
        for spec in specs:
            if on_event:
                on_event("start", spec, None)
            spec.trial_dir.mkdir(parents=True, exist_ok=True)
            passed = self.outcomes[spec.task_name][spec.trial - 1]
            res = TrialResult(task=spec.task_name, trial=spec.trial, attempt=spec.attempt, started_at=now_iso(),
                              reward=1.0 if passed else 0.0, raw_reward=1.0 if passed else 0.0, passed=passed,
                              stop_reason="no_tool_call", turns=self.rng.randint(5, 60), tool_calls=self.rng.randint(4, 59),
                              usage=Usage(prompt_tokens=self.rng.randint(10_000, 400_000), completion_tokens=self.rng.randint(500, 20_000)),
                              duration_sec=round(self.rng.uniform(30, 900), 3), agent_duration_sec=1.0, verifier_duration_sec=1.0)
            atomic_write_json(spec.trial_dir / RESULT_FILE, json.loads(res.model_dump_json()))
            if on_event:
                on_event("end", spec, res)
            out.append(res)
        return out


def outcomes_for(tasks: list[str], k: int, seed: int) -> dict[str, list[bool]]:
    rng = random.Random(seed)
    return {t: [rng.random() < 0.6 for _ in range(k)] for t in tasks}


def setup(root: Path, n_tasks: int, k: int) -> dict[str, Any]:
    """Run folder after iteration 1 (evaluated, 5 changes evolved and tagged), before iteration 2."""
    from ahe.config import ExperimentConfig
    from ahe.evolution import phases as loop_mod
    from ahe.evolution.loop import EvolutionLoop
    from ahe.harness.manifest import Manifest, write_manifest

    tasks_dir = root / "tasks"
    tasks = make_tasks(tasks_dir, n_tasks)
    cfg = ExperimentConfig(name="bench", tasks=tasks_dir, iterations=3, k=k, concurrency=8)
    lp = EvolutionLoop(cfg, root / "run")
    repo = lp.prepare(resume=False)
    lp.roles = {r: cfg.models.agent.model_copy(update={"model": "mock", "base_url": "http://127.0.0.1:9/v1"})
                for r in ("agent", "debugger", "evolve")}
    ctx = lp.context(repo)
    state = lp.run.load_state()
    scores = lp.run.load_scores()
    # iteration 1: rollout of the seed (synthetic trials)
    before = outcomes_for(tasks, k, seed=1)
    _patch_executor(loop_mod, SyntheticExecutor(before, 1))
    asyncio.run(lp._run_phase(ctx, 1, "rollout", state, scores, final=False))
    for p in ("rollout", "attribution", "rollback", "debug"):
        state.mark(1, p)
    # iteration 1: evolve — 5 accepted changes, each one commit
    changes = evolve_git(repo, 1, tasks, n_changes=5)
    base = repo.tag_commit("iter-000")
    write_manifest(lp.run.iteration(1).manifest_json, Manifest(iteration=1, base_commit=base, changes=changes))
    state.mark(1, "evolve")
    lp.run.save_state(state)
    # iteration 2's trials: the predicted fixes of changes 1-3 improve; 4 and 5 cause regressions
    after = {t: list(v) for t, v in before.items()}
    for c in changes[:3]:
        for t in c.predicted_fixes:
            after[t] = [True] * k
    for c in changes[3:]:
        for t in c.predicted_fixes:
            after[t] = [False] * k
        for t in c.predicted_regressions:
            after[t] = [False] * k
            before[t] = [True] * k
    # make the regressions real: iteration 1 passed them
    _rewrite_iteration_results(lp, 1, before, k)
    return {"loop": lp, "ctx": ctx, "repo": repo, "state": state, "scores": scores, "after": after, "tasks": tasks}


def _rewrite_iteration_results(lp: Any, it: int, outcomes: dict[str, list[bool]], k: int) -> None:
    from ahe.rollout.metrics import summarize
    from ahe.rollout.models import TrialResult
    from ahe.io import atomic_write_json

    results = [TrialResult(task=t, trial=i + 1, passed=p, reward=float(p)) for t, v in outcomes.items() for i, p in enumerate(v)]
    atomic_write_json(lp.run.iteration(it).results_json, json.loads(summarize(results, k=k).model_dump_json()))


def _patch_executor(loop_mod: Any, executor: SyntheticExecutor) -> None:
    from ahe.rollout import scheduler

    async def run_rollouts(cfg, out, **kw):
        kw["executor"] = executor  # the loop passes its own (None outside `ahe simulate`)
        return await scheduler.run_rollouts(cfg, out, **kw)

    loop_mod.run_rollouts = run_rollouts


def evolve_git(repo: Any, it: int, tasks: list[str], n_changes: int) -> list[Any]:
    """The git operations of an evolve phase that records `n_changes` changes."""
    from ahe.harness.manifest import ChangeEntry

    base = repo.head()
    changes = []
    for i in range(1, n_changes + 1):
        rel = f"skills/bench-{it}-{i}/SKILL.md" if i % 2 else "LongTermMEMORY.md"
        path = repo.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"---\nname: bench-{it}-{i}\ndescription: lesson {i}\n---\nbody\n" if i % 2 else f"- lesson {it}.{i}\n")
        changed = repo.changed_files()
        commit = repo.commit_paths(changed, f"chg-{i}: lesson {i}")
        repo.files_in_commit(commit)
        repo.show_file(base, "agent.yaml")  # the gate's protected-block check
        n = len(tasks)  # distinct tasks per change, so the verdicts are known in advance
        fixes = [tasks[(2 * i) % n], tasks[(2 * i + 1) % n]]
        risks = [tasks[(2 * n_changes + 2 + i) % n]]
        changes.append(ChangeEntry(id=f"chg-{i}", component="long_term_memory" if i % 2 == 0 else "skill", files=changed,
                                   summary=f"lesson {i}", root_cause="synthetic cause", targeted_fix="synthetic fix",
                                   predicted_fixes=fixes, predicted_regressions=risks, commit=commit, status="accepted"))
    if repo.is_dirty():
        repo.discard_uncommitted()
    else:
        repo.discard_uncommitted()
    repo.tag(f"iter-{it:03d}")
    return changes


def one_run(n_tasks: int, k: int) -> dict[str, float]:
    from ahe.evolution import phases as loop_mod
    from ahe.rollout.scheduler import RolloutConfig, plan_rollouts

    root = Path(tempfile.mkdtemp(prefix=f"ahe-bench-bookkeeping-{os.getpid()}-"))  # pid-named: swept after a kill
    try:
        s = setup(root, n_tasks, k)
        lp, repo, state, scores = s["loop"], s["repo"], s["state"], s["scores"]
        _patch_executor(loop_mod, SyntheticExecutor(s["after"], 2))
        times: dict[str, float] = {}
        for phase in ("rollout", "attribution", "rollback"):
            t0 = time.perf_counter()
            asyncio.run(lp._run_phase(s["ctx"], 2, phase, state, scores, final=False))
            state.mark(2, phase)
            lp.run.save_state(state)
            times[phase] = time.perf_counter() - t0
        t0 = time.perf_counter()
        evolve_git(repo, 2, s["tasks"], n_changes=5)
        times["evolve git"] = time.perf_counter() - t0
        cfg = RolloutConfig(tasks_dir=root / "tasks", workspace=lp.run.workspace, k=k, seal_dir=lp.run.sealed)
        from ahe.tasks import snapshot

        snapshot._digests.clear()  # a resume is a new process: every task file is hashed again against the seal
        snapshot._indexes.clear()
        t0 = time.perf_counter()
        plan = plan_rollouts(cfg, lp.run.iteration(2).root)
        times["resume scan"] = time.perf_counter() - t0
        att = json.loads(lp.run.iteration(2).attribution_json.read_text())
        rb = json.loads(lp.run.iteration(2).rollback_json.read_text())
        times["_check"] = {"verdicts": [c["verdict"] for c in att["changes"]],
                           "rolled_back": [r["change_id"] for r in rb["rolled_back"] if r.get("revert_commit")],
                           "done_trials": len(plan.done), "pending": len(plan.specs)}
        return times
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=89)
    ap.add_argument("-k", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="print a pyinstrument profile of the last run")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    runs = []
    for r in range(args.repeat):
        prof = None
        if args.profile and r == args.repeat - 1:
            from pyinstrument import Profiler

            prof = Profiler(interval=0.0005)
            prof.start()
        t = one_run(args.tasks, args.k)
        if prof is not None:
            prof.stop()
        runs.append(t)
        total = sum(v for kk, v in t.items() if kk in PHASES)
        print(f"  run {r + 1}/{args.repeat}: total {total:.3f} s  " + "  ".join(f"{p} {t[p]:.3f}" for p in PHASES),
              file=sys.stderr, flush=True)
    check = runs[-1]["_check"]
    rows = []
    med = {p: median(x[p] for x in runs) for p in PHASES}
    totals = [sum(x[p] for p in PHASES) for x in runs]
    for p in PHASES:
        rows.append([p, f"{med[p] * 1000:.0f}"])
    rows.append(["total", f"{median(totals) * 1000:.0f}"])
    print(table(["phase", "ms (median)"], rows,
                title=f"Bookkeeping of one iteration — {args.tasks} tasks × k={args.k} = {args.tasks * args.k} trials, "
                      f"median of {args.repeat} runs (mark: ≤ 2000 ms)"))
    print(f"check: verdicts {check['verdicts']}, rolled back {check['rolled_back']}, "
          f"resume scan found {check['done_trials']} finished / {check['pending']} pending trials")
    if args.profile and prof is not None:
        print(prof.output_text(unicode=False, show_all=False))
    data = {"tasks": args.tasks, "k": args.k, "repeat": args.repeat, "phases_ms": {p: med[p] * 1000 for p in PHASES},
            "total_ms": median(totals) * 1000, "totals_ms": [t * 1000 for t in totals], "check": check}
    path = write_result("bookkeeping", data, args.out)
    print(f"\nwritten: {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


if __name__ == "__main__":
    main()
