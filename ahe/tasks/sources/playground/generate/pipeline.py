"""`ahe tasks generate`: run the model stages, assemble the projects, derive the tasks.

```
OUT/generate/propose.json            the proposals (and rejected ones)
OUT/projects/<p>/plan.json           phases → modules → tasks with test checklists
OUT/projects/<p>/scaffold.json       the stubbed package
OUT/projects/<p>/tests/<task>.json   the task's checked tests
OUT/projects/<p>/reference/<task>.json   the reference after the task, or why it was dropped
OUT/projects/<p>/project/            the finished playground project (playground.toml, code, tests)
OUT/tasks/                           the derived task set (ahe tasks derive), derive.json
OUT/events.jsonl  OUT/traces/<stage>/<unit>/  OUT/generation.json (tokens, cost, counts)
```
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from rich.markup import escape

from ahe.errors import AheError
from ahe.io import atomic_write_json
from ahe.tasks.sources.playground.generate import stages
from ahe.tasks.sources.playground.generate.context import WORKSPACE, GenContext, UnitUsage, maybe_kill
from ahe.tasks.sources.playground.generate.parse import ProjectProposal


class GenerateOptions(BaseModel):
    out: Path
    projects: int = 2
    model: str | None = None
    mock_policy: Path | None = None
    holdout: float = 0.0
    price_input: float | None = None
    price_output: float | None = None
    base_url: str | None = None


def _client(opts: GenerateOptions, base_url: str | None):
    """The generator role's client; the price applies to whichever model the role resolves to."""
    from ahe.llm import make_client
    from ahe.llm.roles import resolve_role
    from ahe.llm.types import Price, RoleConfig

    cfg = RoleConfig(model=opts.model or ("mock-generator" if opts.mock_policy else None),
                     base_url=base_url or opts.base_url, max_attempts=3)
    if opts.price_input is not None or opts.price_output is not None:
        model = resolve_role("generator", cfg).model
        cfg = cfg.model_copy(update={"prices": {model: Price(input=opts.price_input or 0.0,
                                                             output=opts.price_output or 0.0)}})
    return make_client("generator", cfg)


def run_generate(opts: GenerateOptions, console: Any) -> Any:
    """Run (or resume) the whole pipeline; returns a rich renderable summary."""
    from ahe.runtime import load_agent
    from ahe.testing.endpoint import mock_endpoint

    opts.out.mkdir(parents=True, exist_ok=True)
    if opts.mock_policy is not None and not opts.mock_policy.is_file():
        raise AheError(f"--mock-policy {opts.mock_policy}: no such file.")
    with mock_endpoint(opts.mock_policy) as base_url:
        client = _client(opts, base_url)
        agent = load_agent(WORKSPACE)
        asyncio.run(_run(opts, agent, client, console))
    return summarize(opts.out)


async def _run(opts: GenerateOptions, agent: Any, client: Any, console: Any) -> None:
    from ahe.tasks.sources.playground.runner import SandboxRunner

    def say(text: str) -> None:
        console.print(text, markup=True, highlight=False)

    async with SandboxRunner() as runner:
        ctx = GenContext(out=opts.out, agent=agent, client=client, runner=runner, say=say)
        ctx.event("start", projects=opts.projects, model=getattr(client, "model", None))
        proposals = await stages.propose(ctx, opts.projects)
        say(f"[bold]propose[/bold] {len(proposals)} project(s): {', '.join(p.name for p in proposals)}")
        for p in proposals:
            await _project(ctx, p)
    projects = sorted(d / "project" for d in (opts.out / "projects").iterdir() if (d / "project" / "playground.toml").is_file()) \
        if (opts.out / "projects").is_dir() else []
    await asyncio.to_thread(_derive, opts, projects, say)


async def _project(ctx: GenContext, proposal: ProjectProposal) -> None:
    name = proposal.name
    planned = await stages.plan(ctx, proposal)
    ctx.say(f"[bold]plan[/bold] {name}: {len(planned.tasks)} task(s), "
            f"{sum(len(t.checklist) for t in planned.tasks)} checklist test(s)")
    if not planned.tasks:
        return
    scaffold = await stages.scaffold(ctx, proposal, planned)
    ctx.say(f"[bold]scaffold[/bold] {name}: {len(scaffold['package'])} file(s), "
            f"{len(scaffold['dropped_tasks'])} task(s) dropped")
    alive = [t for t in planned.tasks if t.name not in scaffold["dropped_tasks"]]
    written = {}
    for t in alive:
        done = await stages.tests(ctx, proposal, t, scaffold["package"])
        ctx.say(f"[bold]tests[/bold] {name}/{t.name}: {done['status']}, {len(done['rejected'])} rejection(s)")
        if done["status"] == "done":
            written[t.name] = done
    package, kept_tests, done_tasks = dict(scaffold["package"]), {}, []
    for t in alive:
        if t.name not in written:
            continue
        tests_now = {**kept_tests, written[t.name]["file"]: written[t.name]["source"]}
        ref = await stages.reference(ctx, proposal, t, package, tests_now, [d.title for d in done_tasks])
        ctx.say(f"[bold]reference[/bold] {name}/{t.name}: {ref['status']}, {len(ref['rejected'])} rejection(s)")
        if ref["status"] == "done":
            package = ref["package"]
            kept_tests[written[t.name]["file"]] = ref["tests_source"]
            done_tasks.append(t)
    _assemble(ctx, proposal, done_tasks, package, kept_tests)


def _assemble(ctx: GenContext, proposal: ProjectProposal, tasks: list, package: dict[str, str],
              tests: dict[str, str]) -> None:
    """Write the finished project (deterministic from the stage outputs, so rewriting is safe)."""
    final = ctx.path("projects", proposal.name, "project")
    if not tasks:
        ctx.event("dropped", stage="assemble", unit=proposal.name, reason="no task survived")
        shutil.rmtree(final, ignore_errors=True)
        return
    tmp = final.with_name(".project.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    files = {**package, **tests, "tests/__init__.py": ""}
    for rel, text in files.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text, encoding="utf-8")
    (tmp / "playground.toml").write_text(_manifest(proposal, tasks), encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)


def _toml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _manifest(proposal: ProjectProposal, tasks: list) -> str:
    lines = ["# Written by `ahe tasks generate` (SWE-Playground).", "[project]",
             f"name = {_toml_str(proposal.name)}", f"description = {_toml_str(proposal.description)}",
             f"package = {_toml_str(proposal.package)}", ""]
    for t in tasks:
        funcs = ", ".join(_toml_str(f) for f in t.qualified())
        lines += ["[[tasks]]", f"name = {_toml_str(t.name)}", f"title = {_toml_str(t.title)}",
                  f"description = {_toml_str(t.description)}", f"functions = [{funcs}]", ""]
    return "\n".join(lines)


def _derive(opts: GenerateOptions, projects: list[Path], say) -> None:
    from ahe.tasks.sources.playground.taskset import LOG_FILE, derive_task_set

    out = opts.out / "tasks"
    if (out / LOG_FILE).is_file():
        return
    if not projects:
        raise AheError(f"{opts.out}: no project survived generation (see events.jsonl); nothing to derive.")
    holdout = opts.holdout
    if holdout and len(projects) < 2:
        say(f"[yellow]note[/yellow]: --holdout splits by project and only {len(projects)} project survived; "
            "deriving without a held-out split")
        holdout = 0.0
    report = derive_task_set(projects, out, holdout=holdout, log=lambda s: say(f"  {escape(s)}"))
    say(f"[bold]derive[/bold] {len(report.tasks)} task(s): {report.counts}")
    maybe_kill("derive")


def collect(out: Path) -> dict:
    """Tokens, cost and outcomes per stage, from the stage outputs on disk."""
    import json

    stages_: dict[str, dict] = {}
    rejected = 0
    for f in sorted(out.rglob("*.json")):
        rel = f.relative_to(out).parts
        if rel[0] not in ("generate", "projects") or "project" in rel:
            continue
        data = json.loads(f.read_text())
        stage = "propose" if rel[0] == "generate" else (rel[2] if len(rel) > 3 else rel[2].removesuffix(".json"))
        row = stages_.setdefault(stage, {"units": 0, "dropped": 0, "rejected": 0, "prompt_tokens": 0,
                                         "completion_tokens": 0, "cost_usd": None})
        u = UnitUsage.model_validate(data.get("usage") or {})
        row["units"] += 1
        row["dropped"] += data.get("status") == "dropped"
        row["rejected"] += len(data.get("rejected") or [])
        row["prompt_tokens"] += u.prompt_tokens
        row["completion_tokens"] += u.completion_tokens
        if u.cost_usd is not None:
            row["cost_usd"] = (row["cost_usd"] or 0.0) + u.cost_usd
        rejected += len(data.get("rejected") or [])
    derive = json.loads((out / "tasks" / "derive.json").read_text()) if (out / "tasks" / "derive.json").is_file() else None
    return {"stages": stages_, "rejected": rejected, "derived": derive["counts"] if derive else {}}


def summarize(out: Path) -> Any:
    from rich.table import Table

    data = collect(out)
    atomic_write_json(out / "generation.json", data)
    table = Table(title=f"ahe tasks generate {out}")
    for col in ("stage", "units", "dropped", "rejections", "prompt tok", "completion tok", "cost"):
        table.add_column(col, justify="left" if col == "stage" else "right")
    order = ["propose", "plan", "scaffold", "tests", "reference"]
    for stage in sorted(data["stages"], key=lambda s: order.index(s) if s in order else 99):
        r = data["stages"][stage]
        cost = "-" if r["cost_usd"] is None else f"${r['cost_usd']:.4f}"
        table.add_row(stage, str(r["units"]), str(r["dropped"]), str(r["rejected"]), f"{r['prompt_tokens']:,}",
                      f"{r['completion_tokens']:,}", cost)
    table.caption = f"derived tasks: {data['derived'] or 'none'} — log: {out / 'events.jsonl'}"
    return table

