"""`ahe audit RUN_DIR`: what the evolve agent changed, what it predicted, what happened.

Reads only the run folder (DESIGN.md §7): `iterations/NNN/evolve/manifest.json` (or
`manifest.partial.json` while an evolve phase is running), the next iteration's
`attribution.json` and `rollback.json`. Anything not written yet is reported as `pending`,
so the audit works on a run that is still going.

Iteration t's manifest is judged by iteration t+1's attribution (which evaluates the harness
that carries the changes). Numbers in the JSON are exactly those of `attribution.json`; the
overall figures pool the iterations (see `ahe.report.pooling.pooled`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

from rich.markup import escape
from rich.text import Text

from ahe.errors import AheError
from ahe.harness.manifest import ChangeEntry, Component, Manifest
from ahe.report import deferrals, foresight
from ahe.report.bill import bill_summary, render_bill
from ahe.report.pooling import pooled
from ahe.report.tree_view import render_tree, tree_summary
from ahe.run_folder import LATEST_REASON, Attribution, LoopState, PredictionScore, RollbackReport, RunFolder, Scores
from ahe.tasks.sources.swe_ci.summary import swe_ci_numbers

PENDING = "pending"
COMPONENTS = get_args(Component)  # the manifest's component classes, in their order
VERDICT_COLUMNS = ("kept", "rolled_back", "inconclusive", "deferred", "rejected", "pending")


def _outcome(task: str, att: Attribution | None) -> str:
    """What happened to a predicted task in the attribution that judged its change."""
    if att is None:
        return PENDING
    if task in att.improved:
        return "improved"
    if task in att.regressed:
        return "regressed"
    if task not in att.pass_rate_before or task not in att.pass_rate_after:
        return "not evaluated"
    return "no change"


def _pred_block(score: PredictionScore | None) -> dict | None:
    return None if score is None else score.model_dump()


def _trials(v: Any, att: Attribution, counts: dict[str, tuple[tuple[int, int], tuple[int, int]]]) -> list[dict]:
    """The trials a verdict rests on, per task it names (touched, predicted, blamed): with the change against
    without it when the policy recorded them (its watch evidence), else the round's after against before."""
    if v.watch_evidence:
        return [{"task": w.task, "with": list(w.with_change), "without": list(w.without)} for w in v.watch_evidence]
    named = dict.fromkeys([*v.touched_tasks, *v.predicted_fixes, *v.predicted_regressions, *v.unpredicted_regressions,
                           *getattr(v, "replay_regressions", [])])
    ev = {e.task: (e.after, e.before) for e in att.evidence}
    out = []
    for t in named:
        after, before = ev.get(t) or counts.get(t) or ((0, 0), (0, 0))
        if after[1] or before[1]:
            out.append({"task": t, "with": list(after), "without": list(before)})
    return out


def _round_counts(run: RunFolder, it: int) -> dict[str, tuple[tuple[int, int], tuple[int, int]]]:
    """Per task: (successes, trials) on iteration it+1's harness (after) and on iteration it's (before)."""
    before, after = run.iteration(it).results(), run.iteration(it + 1).results()
    if before is None or after is None:
        return {}
    return {t: ((a.passed, a.trials), (before.tasks[t].passed, before.tasks[t].trials))
            for t, a in after.tasks.items() if t in before.tasks}


def trials_text(rows: list[dict]) -> str:
    return "; ".join(f"{r['task']} {r['with'][0]}/{r['with'][1]} with vs {r['without'][0]}/{r['without'][1]} without" for r in rows)


def _change_row(it: int, c: ChangeEntry, partial: bool, att: Attribution | None, rb: RollbackReport | None,
                later: dict | None = None, counts: dict | None = None) -> dict:
    """One change of iteration `it`, with what iteration it+1's attribution made of it (and, for a
    deferred verdict, what later attributions made of it: the row shows the standing verdict)."""
    v = next((x for x in (att.changes if att else []) if x.change_id == c.id), None)
    r = next((x for x in (rb.rolled_back if rb else []) if x.change_id == c.id and x.change_iteration is None), None)
    steps = (later or {}).get((it, c.id), []) if v is not None else []  # deferred, or kept and judged again
    v, r = deferrals.latest(v, r, steps)
    if c.status == "rejected":
        verdict, reason = "rejected", "; ".join(c.gate_errors) or "rejected by the validation gate"
    elif c.status != "accepted" or partial:
        verdict, reason = PENDING, "evolve phase not finished"
    elif v is not None:
        verdict, reason = v.verdict, v.reason
    else:
        verdict, reason = PENDING, f"not judged yet (iterations/{it + 1:03d}/attribution.json is missing)"
    judged = att if verdict not in (PENDING, "rejected") else None
    return {
        "iteration": it,
        "id": c.id,
        "kind": c.kind,
        "origin": c.origin,  # evolve, or explore (docs/explore.md)
        "component": c.component,
        "files": list(c.files),
        "summary": c.summary,
        "status": c.status,
        "commit": c.commit,
        "predicted_fixes": {t: _outcome(t, judged) if judged else PENDING for t in c.predicted_fixes},
        "predicted_regressions": {t: _outcome(t, judged) if judged else PENDING for t in c.predicted_regressions},
        "unpredicted_regressions_blamed": list(v.unpredicted_regressions) if v else [],
        "verdict": verdict,
        "reason": reason,
        "confidence": v.confidence if v else None,  # statistical policies (noise)
        "touched_tasks": list(v.touched_tasks) if v else [],
        "trials": _trials(v, judged, counts or {}) if v is not None and judged is not None else [],  # what the verdict rests on
        "deferred_steps": deferrals.steps_json(steps),  # later judgements: of a deferred change (noise), of a keep (expected-value)
        "rollback_commit": r.revert_commit if r else None,
        "rollback_method": r.method if r else None,
        "rollback_error": r.error if r else None,
        **foresight.change_fields(c, v, (lambda t: _outcome(t, judged)) if judged else None),
    }


def _iteration_row(run: RunFolder, it: int, scores: Scores, state: LoopState, changes: list[dict],
                   manifest: Manifest | None, partial: bool, att: Attribution | None) -> dict:
    """One iteration: its score, its manifest's state, and how iteration it+1 judged it."""
    sc = scores.get(it)
    own_att = run.iteration(it).attribution()  # this iteration judging it-1's changes
    final = bool(sc and sc.final)
    return {
        "iteration": it,
        "pass_at_1": sc.pass_at_1 if sc else None,
        "metric_value": sc.metric_value if sc else None,
        "swe_ci": swe_ci_numbers(sc.reward_means) if sc else None,  # EvoScore, zero-regression, ... (SWE-CI tasks)
        "evaluated_tag": sc.harness_tag if sc else None,
        "phases_done": state.done.get(f"{it:03d}", []),
        "final_evaluation": final,
        "manifest": ("none (final evaluation)" if final else "missing") if manifest is None else ("partial" if partial else "final"),
        "changes": changes,
        # judgement of THIS iteration's changes, made by iteration it+1
        "judged_by": it + 1 if att is not None else None,
        "improved": att.improved if att else None,
        "regressed": att.regressed if att else None,
        "n_tasks": att.n_tasks if att else None,
        "attribution_metric": att.metric if att else None,
        "fix_predictions": _pred_block(att.fix_predictions if att else None),
        "regression_predictions": _pred_block(att.regression_predictions if att else None),
        "unpredicted_improvements": att.unpredicted_improvements if att else None,
        "unpredicted_regressions": att.unpredicted_regressions if att else None,
        **foresight.iteration_fields(att),
        "attribution_file": str(run.iteration(it + 1).attribution_json.relative_to(run.root)) if att is not None else None,
        # flips measured by this iteration's own attribution (of iteration it-1's changes)
        "evaluated_flips": None if own_att is None else {"improved": own_att.improved, "regressed": own_att.regressed},
        # the noise policy's per-task evidence and re-evaluation spending, when it judged these changes
        "policy": att.strictness if att else None,
        "evidence": [e.model_dump(mode="json") for e in att.evidence] if att else [],
        "reeval": att.reeval.model_dump(mode="json", exclude={"harnesses"}) if att and att.reeval else None,
        # best-of-N (docs/variants.md): every variant of this round, the chosen one and the others' branches
        "variants": _variants(run, it),
    }


def _variants(run: RunFolder, it: int) -> dict | None:
    report = run.iteration(it).variants_report()
    return report.model_dump() if report is not None else None


def build_audit(run_dir: Path, iteration: int | None = None) -> dict:
    """The audit of a run folder as a JSON-able dict (what `ahe audit --json` prints)."""
    if not Path(run_dir).is_dir():
        raise AheError(f"{run_dir}: no such run folder; give the folder `ahe evolve` wrote (runs/<name>)")
    run = RunFolder(run_dir)
    if not run.iterations_dir.is_dir() and not run.scores_json.exists():
        raise AheError(f"{run_dir}: not a run folder (no iterations/ and no scores.json); give the folder `ahe evolve` wrote")
    its = run.iterations()
    if iteration is not None and iteration not in its:
        raise AheError(f"--iteration {iteration}: {run_dir} has no iterations/{iteration:03d} (it has {', '.join(map(str, its)) or 'none'})")
    scores, state = run.load_scores(), run.load_state()
    out_iters: list[dict] = []
    components = {c: {k: 0 for k in ("changes", *VERDICT_COLUMNS)} for c in COMPONENTS}
    fix_scores, reg_scores, n_list = [], [], []
    replay_scores: dict[str, list] = {"replay": [], "union": [], "n": []}
    later = deferrals.deferral_history(run)
    for it in its:
        manifest, partial = run.iteration(it).manifest()
        att, rb = run.iteration(it + 1).attribution(), run.iteration(it + 1).rollback()
        counts = _round_counts(run, it) if att is not None else {}
        changes = [_change_row(it, c, partial, att, rb, later, counts) for c in (manifest.changes if manifest else [])]
        for row in changes:
            comp = components.setdefault(row["component"] or "?", {k: 0 for k in ("changes", *VERDICT_COLUMNS)})
            comp["changes"] += 1
            comp[{"keep": "kept", "rollback": "rolled_back"}.get(row["verdict"], row["verdict"])] += 1
        if att is not None and att.changes:
            fix_scores.append(att.fix_predictions.model_dump())
            reg_scores.append(att.regression_predictions.model_dump())
            n_list.append(att.n_tasks)
            if att.union_regression_predictions is not None and att.replay_regression_predictions is not None:
                replay_scores["replay"].append(att.replay_regression_predictions.model_dump())
                replay_scores["union"].append(att.union_regression_predictions.model_dump())
                replay_scores["n"].append(att.n_tasks)
        out_iters.append(_iteration_row(run, it, scores, state, changes, manifest, partial, att))

    components = {k: v for k, v in components.items() if v["changes"]}
    for v in components.values():
        decided = v["kept"] + v["rolled_back"] + v["inconclusive"] + v["rejected"]
        v["keep_rate"] = v["kept"] / decided if decided else None
    shown = [i for i in out_iters if iteration is None or i["iteration"] == iteration]
    overall = {"fix_predictions": pooled(fix_scores, n_list), "regression_predictions": pooled(reg_scores, n_list)}
    from ahe.report.figures import build_figures

    return {
        "run_dir": str(run.root),
        "finished": state.finished,
        "stopped": state.stopped,
        "best_iteration": scores.best_iteration,
        "best_pass_at_1": scores.best_pass_at_1,
        "metric": scores.metric,
        "best_metric_value": scores.best_metric_value,
        "iterations": shown,
        "overall": {
            "method": "pooled (micro-average) over iterations whose changes were judged by an attribution "
            "with at least one accepted change; iterations with nothing to judge are left out",
            **overall,
            # pooled over the iterations where some change was replayed (docs/foresight.md)
            "replay_regression_predictions": pooled(replay_scores["replay"], replay_scores["n"]),
            "union_regression_predictions": pooled(replay_scores["union"], replay_scores["n"]),
        },
        "components": components,
        "figures": build_figures(run, pooled=overall),
        "best_decisions": best_decisions(run),
        "benchmark": benchmark_of(scores),
        "bill": bill_summary(run),
        "holdout": _holdout(run),
        "tree": tree_summary(run),
    }


def _holdout(run: RunFolder) -> dict | None:
    """The sealed held-out check of best (holdout:, docs/audit.md): both gains side by side."""
    from ahe.evolution.holdout_phase import load_result, words

    r = load_result(run)
    return None if r is None else {**r.model_dump(mode="json"), "search_gain_points": r.search_gain_points, "words": words(r)}


def benchmark_of(scores: Scores) -> dict:
    """The benchmark hash of each evaluated iteration (ahe.tasks.snapshot); `same` is False when
    iterations were evaluated on different tasks, so their pass@1 cannot be compared."""
    hashes = {s.iteration: s.benchmark_hash for s in scores.iterations}
    known = {h for h in hashes.values() if h}
    return {"hashes": hashes, "same": len(known) <= 1, "recorded": bool(known)}


def best_decisions(run: RunFolder) -> list[dict]:
    """H_best's choice after each rollback under the noise policy (reeval.json `best`), as JSON."""
    from ahe.run_folder import ReevalSummary, read_model

    out = []
    for it in run.iterations():
        info = read_model(run.iteration(it).reeval_json, ReevalSummary)
        if info is not None and info.best is not None:
            out.append({"iteration": it, **info.best.model_dump(mode="json", exclude={"harnesses"})})
    return out


# ---------------------------------------------------------------- human output


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _outcomes(d: dict[str, str]) -> str:
    return "\n".join(f"{t}: {o}" for t, o in d.items()) or "-"


def render_audit(audit: dict, console: Any) -> None:
    from rich.table import Table

    VERDICT_STYLE = {"keep": "green", "rollback": "red", "inconclusive": "yellow", "deferred": "cyan", "rejected": "magenta",
                     PENDING: "dim"}
    status = "finished" if audit["finished"] else "still going (or stopped early)"
    console.print(f"[bold]ahe audit[/] {escape(str(audit['run_dir']))} — run {status}; best iteration {audit['best_iteration']}")
    bench = audit.get("benchmark") or {}
    if not bench.get("same", True):
        seen = ", ".join(f"{it}: {(h or 'none')[:12]}" for it, h in bench["hashes"].items())
        console.print(f"[red]iterations were evaluated on different benchmarks ({seen}): their pass@1 are not comparable[/]")
    elif bench.get("recorded"):
        console.print(f"benchmark {next(h for h in bench['hashes'].values() if h)[:12]} (sealed verifiers, every iteration)")
    if audit.get("holdout"):
        console.print(f"[bold]held-out check[/] of best: {escape(audit['holdout']['words'])}")
    for it in audit["iterations"]:
        head = f"Iteration {it['iteration']}"
        if it["pass_at_1"] is not None:
            head += f" — evaluated {it['evaluated_tag']} pass@1 {it['pass_at_1']:.3f}"
            if audit.get("metric", "pass_rate") != "pass_rate" and it.get("metric_value") is not None:
                head += f", mean {audit['metric']} {it['metric_value']:.3f}"
        head += f"; manifest {it['manifest']}"
        if it["judged_by"]:
            head += f"; judged by iteration {it['judged_by']}"
        console.print()
        console.print(f"[bold]{head}[/]")
        if it.get("swe_ci"):
            console.print("  SWE-CI  " + "  ".join(f"{k} {v:.3f}" for k, v in it["swe_ci"].items()))
        if it.get("variants"):
            v = it["variants"]
            console.print(escape(f"  best of {len(v['variants'])} variants by {v['rule']}: variant {v['chosen']} ({v['reason']})"))
            for r in v["variants"]:
                p1 = "n/a" if r["pass_at_1"] is None else f"{r['pass_at_1']:.3f}"
                console.print(escape(f"    {'*' if r['chosen'] else ' '} v{r['n']} branch {r['branch']} ({(r['head_commit'] or '')[:10]}): "
                                     f"pass@1 {p1}, changes {', '.join(r['accepted']) or '-'}"
                                     + (f", rejected {', '.join(r['rejected'])}" if r["rejected"] else "")))
        if not it["changes"]:
            if it["final_evaluation"] and it["manifest"].startswith("none"):
                console.print("  final evaluation of the last harness: no evolve phase")
            else:
                console.print("  no changes" if it["manifest"] != "missing" else "  no manifest yet (pending)")
        else:
            t = Table(show_lines=True)
            for col in ("change", "component", "files", "summary", "predicted fixes", "predicted regressions",
                        "replay at risk", "verdict", "reason", "rollback"):
                t.add_column(col, overflow="fold")
            for c in it["changes"]:
                style = VERDICT_STYLE.get(c["verdict"], "")
                rb = c["rollback_commit"][:10] + f" ({c['rollback_method']})" if c["rollback_commit"] else "-"
                conf = f"\n(confidence {c['confidence']:.2f})" if c.get("confidence") is not None else ""
                t.add_row(
                    Text(c["id"]), Text(c["component"]), Text("\n".join(c["files"])), Text(c["summary"]),  # model text: not markup
                    _outcomes(c["predicted_fixes"]), _outcomes(c["predicted_regressions"]), foresight.replay_cell(c),
                    f"[{style}]{c['verdict']}[/]{conf}",
                    Text(c["reason"] + (f"\ntrials: {trials_text(c['trials'])}" if c.get("trials") else "")), rb,
                )
            console.print(t)
            if any(c.get("deferred_steps") for c in it["changes"]):
                console.print(deferrals.deferral_table(it))
        if it.get("evidence"):
            console.print(_evidence_table(it))
        if it["fix_predictions"] is not None:
            console.print(
                f"  improved {it['improved'] or '-'}, regressed {it['regressed'] or '-'} (of {it['n_tasks']} tasks"
                + (f", by mean {it['attribution_metric']})" if it.get("attribution_metric") not in (None, "pass_rate") else ")")
            )
            console.print(_prediction_table(f"Predictions of iteration {it['iteration']}", it["fix_predictions"],
                                            it["regression_predictions"], replayed=it))
    ov = audit["overall"]
    console.print()
    console.print(_prediction_table("Overall (pooled over judged iterations)", ov["fix_predictions"],
                                    ov["regression_predictions"], pooled=True, replayed=ov))
    if audit.get("best_decisions"):
        console.print(_best_table(audit["best_decisions"]))
    t = Table(title="Changes per component class")
    for col in ("component", "changes", *VERDICT_COLUMNS, "keep rate"):
        t.add_column(col.replace("_", " "), justify="left" if col == "component" else "right")
    for comp, v in audit["components"].items():
        t.add_row(comp, *(str(v[k]) for k in ("changes", *VERDICT_COLUMNS)), _pct(v["keep_rate"]))
    console.print(t)
    from ahe.report.figures import render_figures

    render_figures(audit["figures"], console)
    render_bill(audit.get("bill"), console)
    if audit.get("tree"):
        render_tree(audit["tree"], console)


def _evidence_table(it: dict) -> Any:
    """The noise policy's evidence: per task, successes/trials on each side and the verdict's basis."""
    from rich.table import Table

    r = it.get("reeval") or {}
    spent = f"; re-evaluation {r['spent']} trials of a budget of {r['budget']}, {r['tokens']:,} tokens, ${r['cost_usd']:.2f}" if r else ""
    t = Table(title=f"Evidence per task (policy {it['policy']}{spent})")
    for col in ("task", "before s/n", "after s/n", "history", "re-eval", "P(up)", "moved", "pinned on", "how"):
        t.add_column(col, overflow="fold")
    for e in it["evidence"]:
        t.add_row(Text(e["task"]), f"{e['before'][0]}/{e['before'][1]}", f"{e['after'][0]}/{e['after'][1]}", str(e["history_trials"]),
                  str(e["reeval_trials"]), f"{e['p_up']:.3f}", e["movement"], ", ".join(e["attributed_to"]) or "-", Text(e["how"]))
    return t


def _best_table(rows: list[dict]) -> Any:
    """H_best without the winner's curse: the two best harnesses, the tasks re-run, the lead's posterior."""
    from rich.table import Table

    latest = all(r["reason"].startswith(LATEST_REASON) for r in rows)  # expected-value: no contest
    t = Table(title="H_best after each rollback (" + ("the harness the decisions left; " if latest else
                    "the leader's lead must pass the evidence test; ") + "est. = estimated pass@1, a posterior mean, not a score)")
    for col in ("after iteration", "leader before", "declared best", "runner-up", "differ on", "re-run", "trials",
                "P(lead)", "why"):
        t.add_column(col, overflow="fold")
    for r in rows:
        est = {c["commit"]: c["estimate"] for c in r["candidates"]}
        name = lambda c: f"{c[:10]} (est. {est[c]:.3f})" if c else "-"  # noqa: E731
        t.add_row(str(r["iteration"]), name(r["leader_before"]), f"round {r['best_round']}: {name(r['best_commit'])}",
                  name(r["runner_up"]), ", ".join(r["tasks"]) or "-", ", ".join(r["reeval_tasks"]) or "-",
                  f"{r['spent']} of {r['budget']}", "-" if r["p_lead"] is None else f"{r['p_lead']:.3f}", Text(r["reason"]))
    return t


def _prediction_table(title: str, fix: dict, reg: dict, pooled: bool = False, replayed: dict | None = None) -> Any:
    from rich.table import Table

    t = Table(title=title)
    for col in ("predictions", "predicted", "happened", "hits", "precision", "random precision", "recall", "random recall"):
        t.add_column(col, justify="left" if col == "predictions" else "right")
    extra = foresight.extra_rows(replayed, pooled)
    for name, s in (("fix", fix), ("regression (agent)" if extra else "regression", reg), *extra):
        n = {k: str(s[k]) if pooled else str(len(s[k])) for k in ("predicted", "actual", "hits")}
        t.add_row(name, n["predicted"], n["actual"], n["hits"], _pct(s["precision"]), _pct(s["random_precision"]),
                  _pct(s["recall"]), _pct(s["random_recall"]))
    return t


def audit_command(run_dir: Path, iteration: int | None = None, fmt: str | bool = "table") -> int:
    """`ahe audit`: print the audit (tables, Markdown, or JSON; ahe.tables). Returns the exit code."""
    from ahe.tables import TableOutput

    audit = build_audit(Path(run_dir), iteration)
    out = TableOutput(fmt)
    if out.fmt == "json":
        print(json.dumps(audit, indent=2))
    else:
        render_audit(audit, out)
    return 0
