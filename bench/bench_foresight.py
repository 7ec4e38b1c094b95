"""Regression foresight: how long replaying one change over a round takes, and what it foresees.

1. Speed: one change replayed over a synthetic round of 89 tasks x 2 trials x 40 turns
   (debugger.synthetic: realistic outputs, ~7,300 recorded steps), recorded tool calls only
   (no re-execution), both sides of the change through the real runtime (workspace loading,
   the session's hook runner, schema validation). Three kinds of change: a middleware with one
   before_tool rule, a middleware using every replayable hook, a tool schema change. Timed in
   process and through the isolated child process record_change uses (median of N runs).
2. Foresight: the scripted scenario set with known regressions (tests/foresight_support.py):
   regression recall and precision of the agent alone, the replay alone and their union.

    python bench/bench_foresight.py [--runs 3] [--tasks 89] [--trials 2] [--turns 40]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, median, table, write_result  # noqa: E402

sys.path.insert(0, str(REPO))

DENY = ("from ahe.runtime import HookResult, Middleware\n\n\nclass Guard(Middleware):\n"
        "    def before_tool(self, ctx, call):\n"
        "        if 'rm -rf /' in (call.arguments or {}).get('command', ''):\n"
        "            return HookResult(deny='refused')\n")
ALL_HOOKS = ("from ahe.runtime import HookResult, Middleware\n\n\nclass Busy(Middleware):\n"
             "    def before_session(self, ctx):\n        return None\n"
             "    def before_model(self, ctx, messages):\n"
             "        if len(messages) > 60:\n            return HookResult(add_message='long session: summarise your progress')\n"
             "    def after_model(self, ctx, response):\n        return None\n"
             "    def before_tool(self, ctx, call):\n"
             "        if 'timeout' in (call.arguments or {}).get('command', ''):\n"
             "            return HookResult(deny='no timeouts')\n"
             "    async def wrap_tool_call(self, ctx, call, call_next):\n        return await call_next(call)\n"
             "    def after_tool(self, ctx, call, result):\n"
             "        if len(result.content) > 6000:\n"
             "            return HookResult(replace_tool_output=result.content[:6000])\n")


def _changes(repo: Path) -> list[tuple[str, str]]:
    from tests.foresight_support import commit_change, git, with_middleware

    out = [("middleware: one before_tool rule", commit_change(repo, with_middleware(repo, "guard", "Guard", DENY)))]
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    out.append(("middleware: every replayable hook", commit_change(repo, with_middleware(repo, "busy", "Busy", ALL_HOOKS))))
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    desc = (repo / "tool_descriptions" / "run_shell_command.tool.yaml").read_text()
    desc = desc.replace("      description: The bash command to run.", "      description: The bash command to run.\n      maxLength: 40")
    out.append(("tool schema: command maxLength 40", commit_change(repo, {"tool_descriptions/run_shell_command.tool.yaml": desc})))
    return out


def _cpu() -> float:
    """CPU seconds of this process and its finished children (git, the isolated replay)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def speed(root: Path, runs: int, tasks: int, trials: int, turns: int) -> list[dict]:
    from debugger.synthetic import make_iteration
    from evolve_agent.replay import ReplaySettings, replay_change, replay_change_isolated
    from tests.foresight_support import harness_repo

    it = root / "run" / "iterations" / "001"
    raw = make_iteration(it, tasks=tasks, trials=trials, turns=turns)["raw_bytes"]
    repo = harness_repo(root / "workspace")
    rows = []
    for name, commit in _changes(repo):
        inproc, isolated, cpu_in, cpu_iso, report = [], [], [], [], None
        for _ in range(runs):
            t0, c0 = time.perf_counter(), _cpu()
            report = replay_change(repo, commit, it)
            inproc.append(time.perf_counter() - t0)
            cpu_in.append(_cpu() - c0)
            t0, c0 = time.perf_counter(), _cpu()
            replay_change_isolated(repo, commit, it, settings=ReplaySettings())
            isolated.append(time.perf_counter() - t0)
            cpu_iso.append(_cpu() - c0)
        rows.append({"change": name, "trials": report.trials_replayed, "steps": report.steps_replayed,
                     "tasks_touched": len(report.tasks), "at_risk": len(report.at_risk),
                     "in_process_sec": median(inproc), "isolated_sec": median(isolated),
                     "in_process_cpu_sec": median(cpu_in), "isolated_cpu_sec": median(cpu_iso),
                     "load_average": os.getloadavg()[0],
                     "runs_in_process": inproc, "runs_isolated": isolated, "trajectory_mb": round(raw / 1e6, 1)})
    return rows


def foresight(root: Path) -> dict:
    from tests.foresight_support import measure_scenarios

    m = measure_scenarios(root)
    att = m["attribution"]
    out = {}
    for who, s in (("agent", att.regression_predictions), ("replay", att.replay_regression_predictions),
                   ("union", att.union_regression_predictions)):
        out[who] = s.model_dump()
    out["false_alarms_on_untouched_change"] = len(m["reports"]["chg-4"].at_risk)
    out["seconds_with_reexec"] = sum(r.seconds for r in m["reports"].values())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=89)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix=f"ahe-bench-foresight-{os.getpid()}-"))  # pid-named: swept after a kill
    try:
        rows = speed(root / "speed", args.runs, args.tasks, args.trials, args.turns)
        fs = foresight(root / "scenarios")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(table(["change", "trials", "steps", "tasks touched", "at risk", "in process (s)", "CPU (s)",
                 "isolated (s)", "CPU (s)", "load avg"],
                [[r["change"], r["trials"], r["steps"], r["tasks_touched"], r["at_risk"],
                  f"{r['in_process_sec']:.2f}", f"{r['in_process_cpu_sec']:.2f}", f"{r['isolated_sec']:.2f}",
                  f"{r['isolated_cpu_sec']:.2f}", f"{r['load_average']:.1f}"] for r in rows],
                title=f"Replay of one change over {args.tasks} tasks x {args.trials} trials x {args.turns} turns "
                      f"(recorded calls only, median of {args.runs})"))
    print()
    f = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731
    print(table(["predictor", "predicted", "hits", "regressed", "precision", "random", "recall", "random"],
                [[who, len(s["predicted"]), len(s["hits"]), len(s["actual"]), f(s["precision"]),
                  f(s["random_precision"]), f(s["recall"]), f(s["random_recall"])]
                 for who, s in ((w, fs[w]) for w in ("agent", "replay", "union"))],
                title="Scripted scenario set (5 changes, 4 known regressions among 6 tasks)"))
    ratio = fs["union"]["recall"] / fs["agent"]["recall"] if fs["agent"]["recall"] else float("inf")
    print(f"\nunion recall / agent recall = {ratio:.1f}x; alarms on the change that touches nothing: "
          f"{fs['false_alarms_on_untouched_change']}")
    path = write_result("foresight", {"speed": rows, "scenarios": fs, "union_over_agent_recall": ratio,
                                      "params": {k: str(v) for k, v in vars(args).items()}}, args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
