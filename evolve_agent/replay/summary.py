"""The replay in a few lines, as the evolve agent reads it when it records a change."""

from __future__ import annotations

from evolve_agent.replay.models import ReplayReport, TaskImpact

MAX_TASKS_SHOWN = 8


def _task_line(t: TaskImpact) -> str:
    trials = len(t.trials)
    rate = f", passes {t.pass_rate:.0%} today" if t.pass_rate is not None else ""
    return (f"{t.task} ({trials} trial(s), {t.steps_differing} step(s){rate}) — first {t.first.ref}: "
            f"{'; '.join(t.first.reasons)[:240]}")


def render_for_agent(r: ReplayReport) -> str:
    if not r.replayable:
        return f"Replay: {r.reason or 'not replayable'}."
    n_trials = sum(len(t.trials) for t in r.tasks)
    passing = [t for t in r.tasks if t.passes]
    failing = [t for t in r.tasks if not t.passes]
    lines = []
    if not r.tasks:
        lines.append(f"Replay ({', '.join(r.kinds)}): this change alters no recorded step of the "
                     f"{r.trials_replayed} trial(s) replayed.")
    else:
        lines.append(f"Replay ({', '.join(r.kinds)}): this change alters steps in {n_trials} trial(s) of "
                     f"{len(r.tasks)} task(s); {len(passing)} of them pass today (at risk of regressing).")
        for label, group in (("At risk (passing today)", passing), ("Failing today", failing)):
            if group:
                lines.append(f"{label}:")
                lines += [f"- {_task_line(t)}" for t in group[:MAX_TASKS_SHOWN]]
                if len(group) > MAX_TASKS_SHOWN:
                    lines.append(f"- … and {len(group) - MAX_TASKS_SHOWN} more")
    for m in r.middleware_errors[:5]:
        lines.append(f"Middleware error: {m.middleware}.{m.hook} raised {m.error} ({m.count}×, first at {m.ref}).")
    if r.reexec:
        lines.append("Re-execution: " + ", ".join(f"{k} {v}" for k, v in r.reexec.items()) + ".")
    if r.not_replayed:
        lines.append(f"Not replayed (text, needs a model): {', '.join(r.not_replayed)}.")
    for e in r.errors[:3]:
        lines.append(f"Replay problem: {e}")
    if passing:
        lines.append("If these are not intended, revise the edit (record a follow-up change) or name them in "
                     "predicted_regressions with revise_change; the replay's at-risk set is kept in the manifest.")
    return "\n".join(lines)
