"""evolve/summary.md: what changed and why, the predictions, the gate's results, the refusals."""

from __future__ import annotations

from pathlib import Path

from ahe.io import atomic_write_text
from ahe.harness.manifest import ChangeEntry, Manifest


def _list(items: list[str]) -> str:
    return ", ".join(items) if items else "-"


def _change(c: ChangeEntry) -> list[str]:
    status = {"accepted": "ACCEPTED", "rejected": "REJECTED", "recorded": "recorded (not validated)"}[c.status]
    out = [f"### {c.id} — {c.summary}", "",
           f"- status: **{status}**; commit `{(c.commit or '-')[:12]}`; kind {c.kind}; component {c.component}",
           f"- files: {_list(c.files)}",
           f"- root cause: {c.root_cause}",
           f"- fix: {c.targeted_fix}"]
    if c.why_this_component:
        out.append(f"- why this component: {c.why_this_component}")
    out.append(f"- predicted fixes: {_list(c.predicted_fixes)}; predicted regressions: {_list(c.predicted_regressions)}")
    if c.failure_evidence:
        out.append("- evidence:")
        out += [f"  - {e.task}: `{e.ref}`" + (f" — {e.note}" if e.note else "") for e in c.failure_evidence]
    if c.evidence_missing:
        out.append(f"- evidence refs that name no file: {_list(c.evidence_missing)}")
    if c.superseded_commits:
        out.append(f"- earlier attempts: {_list([x[:12] for x in c.superseded_commits])}; "
                   f"reverted by {_list([x[:12] for x in c.revert_commits])}")
    elif c.revert_commits:
        out.append(f"- reverted by {_list([x[:12] for x in c.revert_commits])}")
    if c.gate_errors:
        out.append("- gate errors:")
        out += [f"  - {e}" for e in c.gate_errors]
    if c.gate_warnings:
        out.append("- gate warnings:")
        out += [f"  - {w}" for w in c.gate_warnings]
    out.append("")
    return out


def render_summary(m: Manifest) -> str:
    acc, rej = m.accepted(), m.rejected()
    lines = [f"# Evolve phase of iteration {m.iteration}", "",
             f"- base commit `{m.base_commit[:12]}` → head `{(m.head_commit or '-')[:12]}`",
             f"- changes: {len(m.changes)} recorded, {len(acc)} accepted, {len(rej)} rejected",
             f"- evolve agent ended: {m.stop_reason or '-'}"]
    if m.infra_error:
        lines.append(f"- **infrastructure error**: {m.infra_error}")
    if m.shell_isolated is not None:
        lines.append(f"- shell jail: {'bwrap' if m.shell_isolated else 'not available'}")
    if m.usage:
        tokens = int(m.usage.get("prompt_tokens", 0) + m.usage.get("completion_tokens", 0))
        cost = m.usage.get("cost_usd")
        lines.append(f"- tokens: {tokens}" + (f", cost ${cost:.4f}" if cost else ""))
    lines.append("")
    lines.append("## Changes")
    lines.append("")
    if not m.changes:
        lines += ["No change was recorded.", ""]
    for c in m.changes:
        lines += _change(c)
    if m.gate_notes:
        lines += ["## Gate notes", ""] + [f"- {n}" for n in m.gate_notes] + [""]
    lines += ["## Refusals", ""]
    if m.refusals:
        for r in m.refusals:
            where = r.path or (f"`{r.command[:120]}`" if r.command else "")
            lines.append(f"- [{r.session}] {r.tool} {where}: {r.reason}")
    else:
        lines.append("None.")
    lines += ["", "## Discarded edits", ""]
    if m.discarded:
        lines += [f"- [{d.session}] {_list(d.files)}: {d.reason}" for d in m.discarded]
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"


def write_summary(path: Path, manifest: Manifest) -> None:
    atomic_write_text(Path(path), render_summary(manifest))
