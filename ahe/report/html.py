"""`ahe report RUN_DIR [--out FILE] [--open]`: one self-contained HTML dashboard of a run.

Reads the run folder written by `ahe evolve` (DESIGN.md §7) tolerantly — a file that is not
there yet (the run is still going) or cannot be parsed shows as "pending", never a crash —
and renders one HTML file with inline CSS and inline SVG (no script, no network): the pass@1
curve, the task × iteration heatmap, the change timeline with diffs, prediction
precision/recall, tokens and cost per role, and the transfer table when `transfer.json` exists.
"""

from __future__ import annotations

import json
import os
import webbrowser
from pathlib import Path
from typing import Any

from jinja2 import Environment, select_autoescape

from ahe.harness.manifest import ChangeEntry, Manifest
from ahe.llm.types import ROLES
from ahe.report import deferrals, foresight
from ahe.report.bill import bill_summary
from ahe.report import html_svg as svg
from ahe.report.html_template import TEMPLATE
from ahe.report.splits import collect_splits
from ahe.rollout.models import RunResults
from ahe.run_folder import Attribution, LoopState, RollbackReport, RunFolder, Scores, read_json, read_model
from ahe.tasks.sources.swe_ci.summary import swe_ci_numbers

MAX_DIFF_LINES = 400  # per change: keeps the file small; the rest is summarised
MAX_DIFF_CHARS = 40_000


class _Diffs:
    """The diff of a commit in the harness repo (GitPython); None when it cannot be had."""

    def __init__(self, workspace: Path) -> None:
        self.repo = None
        try:
            import git

            if (workspace / ".git").exists():
                self.repo = git.Repo(workspace)
        except Exception:  # noqa: BLE001 - no git, broken repo: the report shows "unavailable"
            self.repo = None

    def lines(self, commit: str | None) -> tuple[list[tuple[str, str]], str | None]:
        """[(css class, line)] and an optional note (truncated, unavailable)."""
        if not commit or self.repo is None:
            return [], "diff unavailable (no commit or no workspace repository)"
        try:
            text = self.repo.git.show(commit, "--format=", "--patch", "--no-color", "--no-ext-diff")
        except Exception as e:  # noqa: BLE001
            return [], f"diff unavailable: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        raw = text.splitlines()
        note = None
        if len(raw) > MAX_DIFF_LINES or len(text) > MAX_DIFF_CHARS:
            kept, size = [], 0
            for ln in raw[:MAX_DIFF_LINES]:
                size += len(ln) + 1
                if size > MAX_DIFF_CHARS:
                    break
                kept.append(ln[:400])
            note = f"diff truncated: {len(kept)} of {len(raw)} lines shown (git show {commit[:12]})"
            raw = kept
        out = []
        for ln in raw:
            if ln.startswith(("+++", "---", "diff --git", "index ", "new file", "deleted file")):
                cls = "meta"
            elif ln.startswith("@@"):
                cls = "hunk"
            elif ln.startswith("+"):
                cls = "add"
            elif ln.startswith("-"):
                cls = "del"
            else:
                cls = ""
            out.append((cls, ln))
        return out, note


def _rel(target: Path, out_dir: Path) -> str:
    return Path(os.path.relpath(target, out_dir)).as_posix()


def _fmt_ratio(v: Any) -> str:
    return "—" if v is None else f"{float(v):.2f}"


def _experiment_name(run: RunFolder) -> str:
    try:
        import yaml

        exp = yaml.safe_load(run.experiment_yaml.read_text(encoding="utf-8"))
        if isinstance(exp, dict) and exp.get("name"):
            return str(exp["name"])
    except Exception:  # noqa: BLE001 - missing or half-written: the folder name will do
        pass
    return run.root.name


def _curve(its: list[int], scores: Scores, results: dict[int, RunResults | None]) -> tuple[list, int | None]:
    """(points of the pass@1 curve, the best iteration)."""
    points: list[tuple[int, float | None]] = []
    for it in its:
        sc = scores.get(it)
        v = sc.pass_at_1 if sc else (results[it].pass_at_1 if results[it] is not None else None)
        points.append((it, v))
    best_it = scores.best_iteration
    if best_it is None:
        done = [(v, i) for i, v in points if v is not None]
        best_it = max(done)[1] if done else None
    return points, best_it


def _heatmap_cells(its: list[int], tasks: set[str], results: dict[int, RunResults | None], state: LoopState) -> dict:
    cells: dict[tuple[str, int], dict] = {}
    for it in its:
        r = results[it]
        if r is None:
            rollout_done = "rollout" in state.done.get(f"{it:03d}", [])
            st = svg.NOT_EVALUATED if (state.finished or rollout_done) else svg.PENDING
            cells.update({(t, it): {"state": st} for t in tasks})
            continue
        for t in tasks:
            tr = r.tasks.get(t)
            if tr is None or tr.trials == 0:
                cells[(t, it)] = {"state": svg.NOT_EVALUATED}
            elif tr.infra_errors >= tr.trials:
                cells[(t, it)] = {"state": svg.INFRA, "infra": tr.infra_errors, "trials": tr.trials}
            else:
                cells[(t, it)] = {"state": "rate", "rate": tr.pass_rate, "infra": tr.infra_errors, "trials": tr.trials,
                                  "passed": tr.passed}
    return cells


def _evidence(run: RunFolder, it: int, ch: ChangeEntry, out_dir: Path) -> list[dict]:
    evid = []
    for e in ch.failure_evidence:
        target = (run.iteration(it).root / e.ref).resolve() if e.ref else None
        ok = bool(target and target.is_relative_to(run.root) and target.exists())
        evid.append({"task": e.task, "ref": e.ref, "note": e.note, "href": _rel(target, out_dir) if ok else None})
    return evid


def _timeline_entry(run: RunFolder, it: int, ch: ChangeEntry, att: Attribution | None, rb: RollbackReport | None,
                    diffs: "_Diffs", out_dir: Path, later: dict | None = None) -> dict:
    """One change of iteration `it`, with its verdict from iteration it+1 (or, when that deferred it,
    its standing verdict from a later attribution) and its diff."""
    v = next((x for x in (att.changes if att else []) if x.change_id == ch.id), None)
    r = next((x for x in (rb.rolled_back if rb else []) if x.change_id == ch.id and x.change_iteration is None), None)
    steps = (later or {}).get((it, ch.id), []) if v is not None else []  # deferred, or kept and judged again
    v, r = deferrals.latest(v, r, steps)
    dlines, dnote = diffs.lines(ch.commit)
    return {
        "id": ch.id, "kind": ch.kind, "component": ch.component, "files": ch.files, "summary": ch.summary,
        "root_cause": ch.root_cause, "targeted_fix": ch.targeted_fix, "status": ch.status, "commit": ch.commit,
        "predicted_fixes": ch.predicted_fixes, "predicted_regressions": ch.predicted_regressions,
        "fixes_improved": v.fixes_improved if v else [],
        "regressions_happened": v.regressions_happened if v else [],
        "unpredicted_regressions": v.unpredicted_regressions if v else [],
        "verdict": v.verdict if v else ("pending" if att is None else "not judged"),
        "reason": (v.reason if v else "") or (f"judged by iteration {it + 1}'s attribution, not written yet" if att is None else ""),
        "rollback": r.model_dump() if r else None, "evidence": _evidence(run, it, ch, out_dir), "diff": dlines, "diff_note": dnote,
        **foresight.timeline_fields(ch, v, att),
        "confidence": v.confidence if v else None,
        "deferred_steps": deferrals.steps_json(steps),
        # noise policy: the measured evidence of the tasks this change moved or predicted
        "measured": [e.model_dump() for e in (att.evidence if att else [])
                     if ch.id in e.attributed_to or e.task in ch.predicted_fixes or e.task in ch.predicted_regressions],
    }


def _timeline(run: RunFolder, its: list[int], scores: Scores, out_dir: Path) -> list[dict]:
    diffs = _Diffs(run.workspace)
    later = deferrals.deferral_history(run)
    timeline = []
    for it in its:
        m = read_model(run.iteration(it).manifest_json, Manifest)
        att, rb = run.iteration(it + 1).attribution(), run.iteration(it + 1).rollback()
        here = run.iteration(it).rollback()
        overview = run.iteration(it).analysis / "overview.md"
        sc = scores.get(it)
        timeline.append({
            "iteration": it, "manifest_missing": m is None,
            "entries": [_timeline_entry(run, it, ch, att, rb, diffs, out_dir, later) for ch in (m.changes if m else [])],
            "final": bool(sc and sc.final),
            "stop_reason": m.stop_reason if m else None,
            "overview_href": _rel(overview, out_dir) if overview.exists() else None,
            "rolled_back_here": [r.model_dump() for r in here.rolled_back] if here else [],
            "reeval": att.reeval.model_dump(exclude={"harnesses"}) if att and att.reeval else None,
        })
    return timeline


def _predictions(its: list[int], attributions: dict[int, Attribution | None]) -> list[dict]:
    predictions = []
    for it in its:
        a = attributions[it]
        if it == 1 and a is None:
            continue  # iteration 1 judges nothing
        row: dict[str, Any] = {"iteration": it, "pending": a is None}
        for key in ("fix_predictions", "regression_predictions"):
            p = getattr(a, key) if a else None
            row[key] = {k: _fmt_ratio(getattr(p, k) if p else None) for k in ("precision", "recall", "random_precision", "random_recall")}
            row[key]["n_predicted"] = len(p.predicted) if p else 0
            row[key]["n_actual"] = len(p.actual) if p else 0
        row["foresight"] = foresight.table_rows(a, _fmt_ratio)
        row["unpredicted_improvements"] = a.unpredicted_improvements if a else []
        row["unpredicted_regressions"] = a.unpredicted_regressions if a else []
        predictions.append(row)
    return predictions


def _usage(its: list[int], scores: Scores) -> tuple[list[str], list[dict]]:
    """(roles in display order, per-iteration tokens and cost)."""
    roles: list[str] = []
    for s in scores.iterations:
        for r_ in list(s.tokens) + list(s.cost_usd):
            if r_ not in roles:
                roles.append(r_)
    order = list(ROLES)
    roles.sort(key=lambda r_: (order.index(r_) if r_ in order else len(order), r_))
    rows = []
    for it in its:
        s = scores.get(it)
        rows.append({"iteration": it, "pending": s is None, "tokens": s.tokens if s else {}, "cost": s.cost_usd if s else {}})
    return roles, rows

def _swe_ci(its: list[int], scores: Scores, results: dict[int, RunResults | None]) -> tuple[list[dict], list[str]]:
    """Per iteration, the SWE-CI numbers of its rollout (none when the tasks are not SWE-CI)."""
    rows = []
    for it in its:
        s, r = scores.get(it), results.get(it)
        numbers = swe_ci_numbers((s.reward_means if s else None) or (r.reward_means if r else None))
        if numbers:
            rows.append({"iteration": it, "numbers": numbers})
    return rows, list(dict.fromkeys(k for r in rows for k in r["numbers"]))


def _figures(run: RunFolder) -> dict[str, Any]:
    """The paper's figures (ahe.report.figures) and their SVG; pending when the run has none yet."""
    from ahe.report import html_figures
    from ahe.report.figures import build_figures

    try:
        figures = build_figures(run.root)
    except Exception:  # noqa: BLE001 - a half-written run: the figures show as pending
        figures = {"difficulties": [], "per_iteration": [], "self_attribution": [], "calibration": {}}
    figures["calibration_rows"] = [(name, figures["calibration"][k]) for k, name in
                                   (("fix_predictions", "fix"), ("regression_predictions", "regression"))
                                   if k in figures["calibration"]]
    return {"figures": figures,
            "difficulty_svg": html_figures.difficulty_curves(figures["per_iteration"], figures["difficulties"]),
            "attribution_svg": html_figures.attribution_chart(figures["self_attribution"])}


def _tree(run: RunFolder) -> dict[str, Any] | None:
    """The search tree of a `search: tree` run (tree_view.tree_summary) drawn as SVG; None for other runs."""
    from ahe.report import html_tree
    from ahe.report.tree_view import tree_summary

    try:
        summary = tree_summary(run)
    except Exception:  # noqa: BLE001 - tree.json being written: the section shows as pending
        return {"error": "tree.json is being written or cannot be read (pending)"}
    if summary is None:
        return None
    return {**summary, "svg": html_tree.tree_svg(summary), "legend_svg": html_tree.tree_legend()}


def _last_best_decision(run: RunFolder) -> dict | None:
    """How the current H_best was declared under the noise policy (reeval.json `best`), if it was."""
    from ahe.report.audit import best_decisions

    rows = best_decisions(run)
    return rows[-1] if rows else None


def collect(run_dir: Path, out_dir: Path) -> dict[str, Any]:
    """Everything the template needs, from whatever is in the run folder right now."""
    run = RunFolder(run_dir)
    scores, state = run.load_scores(), run.load_state()
    its = sorted({s.iteration for s in scores.iterations} | set(run.iterations()))
    results = {it: run.iteration(it).results() for it in its}
    attributions = {it: run.iteration(it).attribution() for it in its}
    points, best_it = _curve(its, scores, results)
    tasks = {t for r in results.values() if r is not None for t in r.tasks}
    roles, usage_rows = _usage(its, scores)
    swe_ci_rows, swe_ci_columns = _swe_ci(its, scores, results)
    transfer_file = run.root / "transfer.json"
    status = "finished" if state.finished else "in progress (or stopped before the end)"
    if state.stopped:
        status += f" — stopped: {state.stopped}"
    from ahe.report.audit import benchmark_of

    if not benchmark_of(scores)["same"]:  # sealed task hashes differ between iterations (docs/rollouts.md)
        status += " — iterations were evaluated on different benchmarks: their pass@1 are not comparable"
    return {
        "title": f"AHE report — {_experiment_name(run)}",
        "run_dir": str(run.root), "status": status, "finished": state.finished,
        "iterations": its, "best_iteration": best_it, "best_pass_at_1": scores.best_pass_at_1,
        "best_commit": scores.best_commit, "points": points, "best_decision": _last_best_decision(run),
        "curve_svg": svg.pass_curve(points, best_it),
        "heatmap_svg": svg.heatmap(sorted(tasks), its, _heatmap_cells(its, tasks, results, state)),
        "legend_svg": svg.heatmap_legend(),
        "timeline": _timeline(run, its, scores, out_dir), "predictions": _predictions(its, attributions),
        "roles": roles, "usage_rows": usage_rows, "totals": (read_json(run.scores_json) or {}).get("totals") or {},
        "token_svg": svg.token_bars([(u["iteration"], u["tokens"]) for u in usage_rows if not u["pending"]], roles),
        "transfer": _transfer_table(read_json(transfer_file)) if transfer_file.exists() else None,
        "splits": collect_splits(run, scores), "tree": _tree(run),
        "swe_ci_rows": swe_ci_rows, "swe_ci_columns": swe_ci_columns,
        "metric": scores.metric, "best_metric_value": scores.best_metric_value,
        "bill": bill_summary(run),
        "infra_total": sum(r.infra_errors for r in results.values() if r is not None),
        **_figures(run),
    }


def _transfer_table(data: Any) -> dict[str, Any]:
    """transfer.json, whatever its exact layout: the first list of records becomes a table."""
    if data is None:
        return {"error": "transfer.json is being written or cannot be parsed (pending)"}
    rows = None
    meta: dict[str, Any] = {}
    if isinstance(data, list):
        rows = data
    elif isinstance(data, dict):
        for k in ("rows", "table", "results", "pairs"):
            if isinstance(data.get(k), list):
                rows = data[k]
                break
        if rows is None:
            rows = next((v for v in data.values() if isinstance(v, list) and v and isinstance(v[0], dict)), None)
        meta = {k: v for k, v in data.items() if not isinstance(v, (list, dict))}
    if not rows or not all(isinstance(r, dict) for r in rows):
        return {"meta": meta, "columns": [], "rows": [], "raw": json.dumps(data, indent=1)[:20_000]}
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}"
        if isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) for x in v):
            return "[" + ", ".join(f"{x:.3f}" if isinstance(x, float) else str(x) for x in v) + "]"
        if isinstance(v, (dict, list)):
            return json.dumps(v)
        return "" if v is None else str(v)

    return {"meta": meta, "columns": cols, "rows": [[cell(r.get(c)) for c in cols] for r in rows], "raw": None}


def render_report(run_dir: Path, out: Path) -> str:
    env = Environment(autoescape=select_autoescape(default=True, default_for_string=True))
    env.filters["ratio"] = _fmt_ratio
    return env.from_string(TEMPLATE).render(**collect(Path(run_dir), Path(out).resolve().parent))


def report_command(run_dir: Path, out: Path | None = None, open_browser: bool = False) -> Path:
    """Write the report (default RUN_DIR/report.html) atomically; optionally open it. Returns the path."""
    from ahe.errors import AheError

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AheError(f"{run_dir}: no such run folder; pass the folder `ahe evolve --run-dir` wrote.")
    if not RunFolder(run_dir).looks_like_run():
        raise AheError(f"{run_dir}: not a run folder (no scores.json, loop_state.json or iterations/); "
                       "pass the folder `ahe evolve --run-dir` wrote.")
    out = Path(out) if out else run_dir / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    html = render_report(run_dir, out)
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, out)
    if open_browser:
        webbrowser.open(out.resolve().as_uri())
    return out
