"""The jinja2 template of `ahe report` (kept as a string so it ships with the package as code).

Autoescape is on: every value from the run folder is escaped; only the SVG produced by
`html_svg` (already escaped there) is passed as Markup.
"""

TEMPLATE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>{{ title }}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1300px;padding:16px 24px;color:#222;background:#fff}
h1{font-size:22px;margin:4px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}
.meta{color:#555}.pending{color:#8a6d00;font-style:italic}
table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f5f5f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
svg.chart text,svg.legend text{font:12px system-ui,sans-serif;fill:#333}
svg .grid{stroke:#e5e5e5}svg .pass-line{fill:none;stroke:#4c78a8;stroke-width:2.5}
svg .best-line{fill:none;stroke:#1a9850;stroke-width:2;stroke-dasharray:6 4}
svg .pt{fill:#4c78a8}svg .pt.best{fill:#1a9850;stroke:#0b4f27;stroke-width:2}
svg .pending-mark{fill:#8a6d00!important;font-style:italic}
svg .cell text{font-size:11px}svg .cell.infra text{fill:#fff}svg .infra-dot{fill:#3b2a4a}
.key{display:inline-block;width:22px;height:0;border-top:3px solid #4c78a8;vertical-align:middle;margin:0 4px 0 12px}
.key.best{border-top:3px dashed #1a9850}
.iteration{border-left:3px solid #ccc;margin:12px 0;padding:2px 0 2px 14px}
.change{border:1px solid #ddd;border-radius:6px;margin:8px 0;padding:8px 12px}
.change header{display:flex;gap:10px;flex-wrap:wrap;align-items:baseline}
.badge{border-radius:10px;padding:1px 8px;font-size:12px;background:#eee}
.verdict-keep{background:#d9f0d3}.verdict-rollback{background:#f8d0cc}.verdict-inconclusive{background:#fff3bf}.verdict-deferred{background:#d0ebff}
.verdict-pending{background:#eee;font-style:italic}
code,pre{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
pre.diff{background:#fafafa;border:1px solid #eee;padding:6px;overflow-x:auto;max-height:420px}
pre.diff span{display:block;white-space:pre}.diff .add{background:#e6ffec}.diff .del{background:#ffebe9}
.diff .hunk{color:#6f42c1}.diff .meta{color:#888}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}dl.kv dt{color:#555}dl.kv dd{margin:0}
.hit{color:#0b6b2f;font-weight:600}.miss{color:#a61b1b}
svg .tree-node .box{fill:#fff;stroke:#888;stroke-width:1.2}svg.tree .node-id{font-weight:700}svg.tree .node-meta{fill:#555}svg.tree .node-marks{fill:#1f3b63;font-size:11px}
svg .tree-node.on-path .box{stroke:#222;stroke-width:2.5}svg .tree-node.finalist .box{stroke:#4c78a8;stroke-width:3}
svg .tree-node.best .box{fill:#e3f4e1;stroke:#1a9850;stroke-width:4}svg .tree-node.exhausted .box{stroke-dasharray:5 3}
svg .tree-node.pruned .box{fill:#ececec;stroke:#bbb}svg.tree .tree-node.pruned text{fill:#999}
svg .bar-track{stroke:#ddd;stroke-width:6;stroke-linecap:round}svg .bar-ci{stroke:#4c78a8;stroke-width:6;stroke-linecap:round}
svg .bar-mean{fill:#fff;stroke:#1f3b63;stroke-width:2}svg .tree-node.pruned .bar-ci{stroke:#bbb}
svg .tree-edge path{fill:none;stroke:#999;stroke-width:1.5}svg .tree-edge.merge-edge path{stroke-dasharray:6 4}
svg .tree-edge.on-path path{stroke:#222;stroke-width:4}svg.tree .edge-label{font-size:11px;fill:#444}
.tree-box{overflow-x:auto}
</style>
</head>
<body>
<header>
<h1>{{ title }}</h1>
<p class="meta">Run folder <code>{{ run_dir }}</code> · status: <strong id="run-status">{{ status }}</strong>
 · iterations: {{ iterations|length }}
{% if best_iteration is not none %} · best: iteration {{ best_iteration }}{% if metric != "pass_rate" and best_metric_value is not none %} (mean {{ metric }} {{ "%.3f"|format(best_metric_value) }}){% elif best_pass_at_1 is not none %} (pass@1 {{ "%.3f"|format(best_pass_at_1) }}){% endif %}{% if best_commit %}, commit <code>{{ best_commit[:12] }}</code>{% endif %}{% endif %}
 · infrastructure errors: {{ infra_total }}</p>
{% if best_decision %}{% set bd = best_decision %}<p class="meta" id="best-decision">H<sub>best</sub> by the evidence (after iteration {{ bd.iteration }}):
{% if bd.p_lead is not none %}P(its lead over <code>{{ (bd.runner_up or '')[:12] }}</code> on {{ bd.tasks|join(', ') }}) = {{ "%.3f"|format(bd.p_lead) }}{% endif %}{% if bd.spent %}, after {{ bd.spent }} re-evaluation trials of {{ bd.reeval_tasks|join(', ') }} on both{% endif %}{% if bd.leader_before and bd.leader_before != bd.best_commit %} (before them the evidence favoured <code>{{ bd.leader_before[:12] }}</code>){% endif %} — {{ bd.reason }}.</p>{% endif %}
<nav>Sections: <a href="#sec-curve">pass@1</a> · <a href="#sec-heatmap">tasks</a> · <a href="#sec-timeline">changes</a>
 · <a href="#sec-predictions">predictions</a> · <a href="#sec-figures">figures</a> · <a href="#sec-usage">tokens &amp; cost</a>{% if tree %} · <a href="#sec-tree">search tree</a>{% endif %}{% if splits %} · <a href="#sec-splits">splits</a>{% endif %}{% if transfer %} · <a href="#sec-transfer">transfer</a>{% endif %}</nav>
</header>

<section id="sec-curve">
<h2>pass@1 per iteration</h2>
<p class="meta">Iteration <em>t</em> evaluates the harness H<sub>t−1</sub>.
<span class="key"></span>pass@1 <span class="key best"></span>best so far (the larger dot marks H<sub>best</sub>)</p>
{{ curve_svg }}
</section>

{% if tree %}
<section id="sec-tree">
<h2>Search tree</h2>
{% if tree.error %}<p class="pending">{{ tree.error }}</p>{% else %}
<p id="tree-best">{% if tree.best %}Best: <strong>{{ tree.best }}</strong> — {{ tree.best_reason }}{% else %}<span class="pending">no best chosen yet</span>{% endif %}</p>
<p class="meta">Every node of <code>tree.json</code> is an evaluated harness (branch <code>node-NNN</code>), placed by depth from the seed;
each edge is labelled with the change ids the child adds; est. = the Beta posterior's mean of pass@1 over the node's own trials, with its 95 % interval.
{% if tree.path_to_best %}Path to best: {{ tree.path_to_best|join(" → ") }}.{% endif %}</p>
{{ tree.legend_svg }}
<div class="tree-box">{{ tree.svg }}</div>
<h3>Merges</h3>
{% if tree.merges %}<table id="tree-merges">
<tr><th>round</th><th>parts</th><th>result</th><th>reason</th></tr>
{% for m in tree.merges %}<tr data-made="{{ 'yes' if m.node else 'no' }}"><td class="num">{{ m.iteration }}</td><td>{{ m.parts|join(" + ") }}</td>
<td>{% if m.node %}made <strong>{{ m.node }}</strong>{% else %}not made{% endif %}</td><td>{{ m.reason }}</td></tr>{% endfor %}
</table>{% else %}<p class="meta">no merge tried yet</p>{% endif %}
{% endif %}
</section>
{% endif %}

{% if splits %}
<section id="sec-splits">
<h2>Splits: evolved on one, checked on the other</h2>
<p class="meta">{% if splits.note %}{{ splits.note }} {% else %}A SWE-Playground task set held out by project{% endif %} (<code>{{ splits.derive }}</code>). pass@1 of the seed
harness and of the evolved one (the best), on the split the run evolved on and on the held-out one.</p>
<table id="splits-table"><tr><th>split</th><th></th><th>projects</th><th>tasks</th><th>seed pass@1</th><th>evolved pass@1</th><th>Δ points</th><th>evidence</th></tr>
{% for r in splits.rows %}<tr data-split="{{ r.split }}"><td><strong>{{ r.split }}</strong></td><td>{{ r.role }}</td><td>{{ r.projects|join(", ") }}</td>
<td class="num">{{ r.tasks }}</td>
{% if r.pending and r.seed is none %}<td colspan="3" class="pending">pending</td>{% else %}
<td class="num">{{ "%.3f"|format(r.seed) if r.seed is not none else "—" }}</td><td class="num">{{ "%.3f"|format(r.evolved) if r.evolved is not none else "—" }}</td>
<td class="num">{{ "%+.1f"|format(r.delta) if r.delta is not none else "—" }}{% if r.ci %} <span class="meta">[{{ "%.1f"|format(r.ci[0]) }}, {{ "%.1f"|format(r.ci[1]) }}]</span>{% endif %}</td>{% endif %}
<td>{% if r.pending %}<span class="pending">{{ r.evidence }}</span>{% else %}{{ r.evidence }}{% endif %}</td></tr>
{% endfor %}</table>
</section>
{% endif %}

{% if swe_ci_rows %}
<section id="sec-swe-ci">
<h2>SWE-CI per iteration</h2>
<p class="meta">Means over the trials of each iteration's rollout (docs/swe-ci.md): EvoScore at γ = 1 and at the tasks' γ, the last round's normalized change, the share of trials without a regression and of trials reaching a = 1.</p>
<table id="swe-ci-table">
<tr><th>iteration</th>{% for c in swe_ci_columns %}<th>{{ c }}</th>{% endfor %}</tr>
{% for r in swe_ci_rows %}<tr><td>{{ r.iteration }}</td>{% for c in swe_ci_columns %}<td class="num">{{ "%.3f"|format(r.numbers[c]) if c in r.numbers else "—" }}</td>{% endfor %}</tr>{% endfor %}
</table>
</section>
{% endif %}

<section id="sec-heatmap">
<h2>Pass rate per task and iteration</h2>
{{ legend_svg }}
<div>{{ heatmap_svg }}</div>
</section>

<section id="sec-timeline">
<h2>Change timeline</h2>
<p class="meta">The changes the evolve agent made in iteration <em>t</em> (manifest M<sub>t</sub>) are judged by iteration <em>t+1</em>'s attribution.</p>
{% for it in timeline %}
<div class="iteration" id="iter-{{ it.iteration }}">
<h3>Iteration {{ it.iteration }}{% if it.overview_href %} · <a href="{{ it.overview_href }}">failure overview</a>{% endif %}</h3>
{% if it.rolled_back_here %}<p>Rolled back at the start of this iteration:
{% for r in it.rolled_back_here %}<code>{{ r.change_id }}</code> ({{ r.method }}{% if r.revert_commit %}, <code>{{ r.revert_commit[:12] }}</code>{% endif %}{% if r.error %}, error: {{ r.error }}{% endif %}){% if not loop.last %}, {% endif %}{% endfor %}</p>{% endif %}
{% if it.reeval %}<p class="meta">Its changes were judged with {{ it.reeval.spent }} re-evaluation trials (budget {{ it.reeval.budget }}, {{ "{:,}".format(it.reeval.tokens) }} tokens, ${{ '%.2f'|format(it.reeval.cost_usd) }}).</p>{% endif %}
{% if it.manifest_missing and it.final %}<p class="meta">final evaluation of the last harness: no evolve step</p>
{% elif it.manifest_missing %}<p class="pending">no manifest yet: evolve pending</p>
{% elif not it.entries %}<p class="meta">no changes recorded{% if it.stop_reason %} (stop: {{ it.stop_reason }}){% endif %}</p>{% endif %}
{% for c in it.entries %}
<article class="change" id="change-{{ it.iteration }}-{{ c.id }}" data-verdict="{{ c.verdict }}">
<header><strong><code>{{ c.id }}</code></strong><span class="badge">{{ c.component }}</span><span class="badge">{{ c.kind }}</span>
<span class="badge verdict verdict-{{ c.verdict }}">{{ c.verdict }}</span>{% if c.status and c.status != "accepted" %}<span class="badge">{{ c.status }}</span>{% endif %}
<span>{{ c.summary }}</span></header>
<dl class="kv">
{% if c.reason %}<dt>reason</dt><dd>{{ c.reason }}</dd>{% endif %}
{% if c.confidence is not none %}<dt>confidence</dt><dd>{{ '%.2f'|format(c.confidence) }}</dd>{% endif %}
{% if c.deferred_steps %}<dt>deferred verdict / judged again</dt><dd>{% for s in c.deferred_steps %}<div>iteration {{ s.judged_by }}: <span class="badge verdict verdict-{{ s.verdict }}">{{ s.verdict }}</span>{% if s.confidence is not none %} ({{ '%.2f'|format(s.confidence) }}){% endif %} — {{ s.reason }}{% for w in s.watch_evidence %}; <code>{{ w.task }}</code> {{ w.with_change[0] }}/{{ w.with_change[1] }} with vs {{ w.without[0] }}/{{ w.without[1] }} without, P(up) {{ '%.3f'|format(w.p_up) }}{% endfor %}</div>{% endfor %}</dd>{% endif %}
{% if c.measured %}<dt>measured</dt><dd>{% for m in c.measured %}<div><code>{{ m.task }}</code>: {{ m.before[0] }}/{{ m.before[1] }} → {{ m.after[0] }}/{{ m.after[1] }}, P(up) {{ '%.3f'|format(m.p_up) }}, {{ m.movement }}{% if m.reeval_trials %}, {{ m.reeval_trials }} re-evaluation trials{% endif %}{% if m.how %} — {{ m.how }}{% endif %}</div>{% endfor %}</dd>{% endif %}
<dt>files</dt><dd>{% for f in c.files %}<code>{{ f }}</code>{% if not loop.last %}, {% endif %}{% endfor %}</dd>
<dt>predicted fixes</dt><dd>{% for t in c.predicted_fixes %}<span class="{{ 'hit' if t in c.fixes_improved else 'miss' }}">{{ t }}</span>{% if not loop.last %}, {% endif %}{% else %}—{% endfor %}</dd>
<dt>predicted regressions</dt><dd>{% for t in c.predicted_regressions %}<span class="{{ 'hit' if t in c.regressions_happened else '' }}">{{ t }}</span>{% if not loop.last %}, {% endif %}{% else %}—{% endfor %}</dd>
{% if c.replay %}<dt>replay at risk</dt><dd class="replay">{% if not c.replay.replayable %}<span class="meta">{{ c.replay.reason }}</span>{% else %}{% for t in c.replay_at_risk %}<div><span class="{{ 'hit' if t in c.regressed_after else '' }}">{{ t }}</span>{% if c.replay.first_steps[t] %} — <code>{{ c.replay.first_steps[t] }}</code>{% endif %}</div>{% else %}none{% endfor %}{% endif %}</dd>{% endif %}
{% if c.replay_regressions %}<dt>foreseen by replay</dt><dd class="hit">{{ c.replay_regressions|join(", ") }} regressed, as the replay foresaw</dd>{% endif %}
{% if c.unpredicted_regressions %}<dt>unpredicted regressions</dt><dd class="miss">{{ c.unpredicted_regressions|join(", ") }}</dd>{% endif %}
{% if c.root_cause %}<dt>root cause</dt><dd>{{ c.root_cause }}</dd>{% endif %}
{% if c.targeted_fix %}<dt>targeted fix</dt><dd>{{ c.targeted_fix }}</dd>{% endif %}
<dt>commit</dt><dd>{% if c.commit %}<code>{{ c.commit[:12] }}</code>{% else %}—{% endif %}{% if c.rollback %} · reverted by <code>{{ (c.rollback.revert_commit or "?")[:12] }}</code> ({{ c.rollback.method }}){% endif %}</dd>
<dt>evidence</dt><dd>{% for e in c.evidence %}<div>{{ e.task }}: {% if e.href %}<a class="evidence" href="{{ e.href }}">{{ e.ref }}</a>{% else %}<code>{{ e.ref }}</code> <span class="miss">(missing)</span>{% endif %}{% if e.note %} — {{ e.note }}{% endif %}</div>{% else %}—{% endfor %}</dd>
</dl>
<details class="diff-box"><summary>diff{% if c.diff %} ({{ c.diff|length }} lines){% endif %}</summary>
{% if c.diff_note %}<p class="meta">{{ c.diff_note }}</p>{% endif %}
{% if c.diff %}<pre class="diff">{% for cls, ln in c.diff %}<span class="{{ cls }}">{{ ln }}</span>{% endfor %}</pre>{% endif %}
</details>
</article>
{% endfor %}
</div>
{% else %}<p class="pending">pending: no iteration yet</p>
{% endfor %}
</section>

<section id="sec-predictions">
<h2>Prediction precision and recall</h2>
<p class="meta">Per iteration, over the changes of the previous one; each value beside the score a random prediction of the same size would get. — means undefined (nothing predicted or nothing happened).</p>
{% if predictions %}
<table id="predictions-table">
<tr><th rowspan="2">iteration</th><th colspan="4">fix predictions</th><th colspan="4">regression predictions</th><th rowspan="2">unpredicted flips</th></tr>
<tr><th>precision</th><th>random</th><th>recall</th><th>random</th><th>precision</th><th>random</th><th>recall</th><th>random</th></tr>
{% for p in predictions %}<tr>
<td>{{ p.iteration }}</td>
{% if p.pending %}<td colspan="9" class="pending">pending</td>{% else %}
{% for key in ["fix_predictions", "regression_predictions"] %}{% set q = p[key] %}
<td class="num">{{ q.precision }}</td><td class="num meta">{{ q.random_precision }}</td><td class="num">{{ q.recall }}</td><td class="num meta">{{ q.random_recall }}</td>{% endfor %}
<td>{% if p.unpredicted_improvements %}improved: {{ p.unpredicted_improvements|join(", ") }}{% endif %}{% if p.unpredicted_regressions %} regressed: {{ p.unpredicted_regressions|join(", ") }}{% endif %}{% if not p.unpredicted_improvements and not p.unpredicted_regressions %}—{% endif %}</td>
{% endif %}</tr>{% endfor %}
</table>
{% set fs = predictions|selectattr("foresight")|list %}{% if fs %}
<h3>Regression foresight</h3>
<p class="meta">Regression predictions of the evolve agent, of the replay of each change over the recorded trials (<code>replay_at_risk</code>), and of both together; docs/foresight.md.</p>
<table id="foresight-table">
<tr><th>iteration</th><th>predictor</th><th>predicted</th><th>hits</th><th>regressed</th><th>precision</th><th>random</th><th>recall</th><th>random</th></tr>
{% for p in fs %}{% for q in p.foresight %}<tr data-who="{{ q.who }}">
<td>{{ p.iteration }}</td><td>{{ q.who }}</td><td class="num">{{ q.n_predicted }}</td><td class="num">{{ q.n_hits }}</td><td class="num">{{ q.n_actual }}</td>
<td class="num">{{ q.precision }}</td><td class="num meta">{{ q.random_precision }}</td><td class="num">{{ q.recall }}</td><td class="num meta">{{ q.random_recall }}</td></tr>{% endfor %}{% endfor %}
</table>{% endif %}
{% else %}<p class="pending">pending: the first attribution comes with iteration 2</p>{% endif %}
</section>

<section id="sec-figures">
<h2>The paper's figures for this run</h2>
<h3>pass@1 by difficulty</h3>
<p class="meta">Difficulty from each task's <code>[metadata] difficulty</code>; the dashed line is overall pass@1.</p>
{{ difficulty_svg }}
<h3>Self-attribution per round</h3>
<p class="meta">Round <em>t</em> judges the changes of iteration <em>t</em>−1: for fix predictions (f) and regression predictions (r),
true positives (predicted and happened), false positives (predicted, did not happen) and misses (happened, not predicted); the line is pass@1.</p>
{{ attribution_svg }}
<h3>Calibration across iterations</h3>
<table id="calibration-table">
<tr><th>predictions</th><th>rounds</th><th>mean precision</th><th>pooled precision</th><th>random (mean)</th><th>random (pooled)</th><th>mean recall</th><th>pooled recall</th><th>random (mean)</th><th>random (pooled)</th></tr>
{% for name, c in figures.calibration_rows %}<tr><td>{{ name }}</td><td class="num">{{ c.rounds }}</td>
<td class="num">{{ c.mean_precision|ratio }}</td><td class="num">{{ c.pooled_precision|ratio }}</td><td class="num meta">{{ c.mean_random_precision|ratio }}</td><td class="num meta">{{ c.pooled_random_precision|ratio }}</td>
<td class="num">{{ c.mean_recall|ratio }}</td><td class="num">{{ c.pooled_recall|ratio }}</td><td class="num meta">{{ c.mean_random_recall|ratio }}</td><td class="num meta">{{ c.pooled_random_recall|ratio }}</td></tr>{% endfor %}
</table>
<p class="meta">Mean: every round weighs the same; pooled: every prediction weighs the same.</p>
<h3>Cost-effectiveness per iteration</h3>
<table id="efficiency-table">
<tr><th>iteration</th><th>pass@1</th>{% for d in figures.difficulties %}<th>{{ d }}</th>{% endfor %}<th>tokens/trial</th><th>succ./Mtok</th></tr>
{% for r in figures.per_iteration %}<tr><td>{{ r.iteration }}</td><td class="num">{{ "%.3f"|format(r.pass_at_1) }}</td>
{% for d in figures.difficulties %}<td class="num">{{ "%.3f"|format(r.by_difficulty[d].pass_at_1) if d in r.by_difficulty else "—" }}</td>{% endfor %}
<td class="num">{{ "%.0f"|format(r.tokens_per_trial) if r.tokens_per_trial is not none else "—" }}</td>
<td class="num">{{ "%.1f"|format(r.successes_per_mtok) if r.successes_per_mtok is not none else "—" }}</td></tr>{% endfor %}
</table>
<p class="meta">Tokens leave infrastructure-aborted trials out; succ./Mtok = passed trials per million tokens.</p>
</section>

<section id="sec-usage">
<h2>Tokens and cost per role</h2>
{{ token_svg }}
<table id="usage-table">
<tr><th>iteration</th>{% for r in roles %}<th>{{ r }} tokens</th>{% endfor %}{% for r in roles %}<th>{{ r }} cost</th>{% endfor %}</tr>
{% for u in usage_rows %}<tr><td>{{ u.iteration }}</td>
{% if u.pending %}<td colspan="{{ roles|length * 2 or 1 }}" class="pending">pending</td>{% else %}
{% for r in roles %}<td class="num">{{ "{:,}".format(u.tokens[r]) if r in u.tokens else "—" }}</td>{% endfor %}
{% for r in roles %}<td class="num">{{ "$%.4f"|format(u.cost[r]) if u.cost[r] is number else "—" }}</td>{% endfor %}{% endif %}</tr>{% endfor %}
{% if totals.tokens %}<tr><th>total</th>{% for r in roles %}<th class="num">{{ "{:,}".format(totals.tokens[r]|int) if r in totals.tokens else "—" }}</th>{% endfor %}
{% for r in roles %}<th class="num">{{ "$%.4f"|format(totals.cost_usd[r]) if totals.cost_usd and totals.cost_usd[r] is number else "—" }}</th>{% endfor %}</tr>{% endif %}
</table>
</section>

{% if bill %}
<section id="sec-bill">
<h2>The bill: spent, projected, and the forecast against the actual</h2>
{% if bill.latest_words %}<p>{{ bill.latest_at }}: {{ bill.latest_words }}</p>{% endif %}
{% if bill.budget_projected %}<p class="pending">{{ bill.budget_projected }}</p>{% endif %}
{% if bill.check_rows %}
<table id="bill-table">
<tr><th>quantity</th><th>forecast at the start</th><th>interval</th><th>actual</th><th>actual / forecast</th><th>inside</th></tr>
{% for r in bill.check_rows %}<tr><td>{{ r.quantity }}</td><td class="num">{{ r.forecast }}</td><td class="num">{{ r.interval }}</td>
<td class="num">{{ r.actual }}</td><td class="num">{{ r.ratio|ratio }}</td><td>{{ "yes" if r.inside else "no" }}</td></tr>{% endfor %}
</table>
<p class="meta">Forecast from {{ bill.forecast_source }}; {{ bill.inside }} of {{ bill.check_rows|length }} quantities inside its interval.{% if bill.ended and bill.ended != "finished all iterations" %} The run ended early ({{ bill.ended }}).{% endif %}</p>
{% elif bill.forecast_source %}<p class="meta">Forecast at the start from {{ bill.forecast_source }}; checked against the actual when the run ends.</p>{% endif %}
</section>
{% endif %}

{% if transfer %}
<section id="sec-transfer">
<h2>Transfer</h2>
{% if transfer.error %}<p class="pending">{{ transfer.error }}</p>{% else %}
{% if transfer.meta %}<p class="meta">{% for k, v in transfer.meta.items() %}{{ k }}: <code>{{ v }}</code>{% if not loop.last %} · {% endif %}{% endfor %}</p>{% endif %}
{% if transfer.columns %}<table id="transfer-table"><tr>{% for c in transfer.columns %}<th>{{ c }}</th>{% endfor %}</tr>
{% for row in transfer.rows %}<tr>{% for v in row %}<td>{{ v }}</td>{% endfor %}</tr>{% endfor %}</table>
{% else %}<pre>{{ transfer.raw }}</pre>{% endif %}{% endif %}
</section>
{% endif %}
<footer class="meta"><p>Written by <code>ahe report</code>. Self-contained: no scripts, no network.</p></footer>
</body>
</html>
"""
