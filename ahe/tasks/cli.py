"""`ahe tasks list|check DIR` — mounted by the main CLI as `ahe tasks`.

Module-level imports stay cheap (typer only); the task code, rich and asyncio are imported
inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ahe.tasks.sources.swe_ci import cli as _swe_ci_cli

app = typer.Typer(
    name="tasks",
    help="Inspect and audit a folder of Harbor / Terminal-Bench 2 tasks.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(_swe_ci_cli.make_app, name="make")
app.add_typer(_swe_ci_cli.import_app, name="import")


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def _fail(message: str, code: int = 2) -> typer.Exit:
    _console(stderr=True).print(f"[red]error:[/red] {message}", markup=True)
    return typer.Exit(code)


def _output(fmt: str | None, as_json: bool):
    """Where a command's table goes (ahe.tables): --format, with --json as its alias."""
    from ahe.tables import TableOutput, resolve_format

    return TableOutput(resolve_format(fmt, as_json), _console())


FORMAT_OPTION = typer.Option(None, "--format", help="table (fits the terminal's width), markdown (pipe tables) or json.")


def _print_json(data: object) -> None:
    import json

    typer.echo(json.dumps(data, indent=2, default=str))


def _load(directory: Path, patterns: list[str] | None):
    import fnmatch

    from ahe.errors import AheError
    from ahe.tasks.loader import load_tasks, unmatched_patterns

    try:
        loaded = load_tasks(directory)
    except AheError as exc:
        raise _fail(str(exc)) from None
    if not patterns:
        return loaded
    # A pattern that only matches a broken task still selects it (its error is shown).
    error_names = [e.name for e in loaded.errors]
    missing = [
        p for p in unmatched_patterns(loaded.tasks, patterns)
        if not any(fnmatch.fnmatchcase(n, p) for n in error_names)
    ]
    if missing:
        raise _fail(
            f"--task {', '.join(missing)} matches no task in {directory}; "
            "run `ahe tasks list` to see the names."
        )
    return load_tasks(directory, include=patterns)


@app.command("list")
def list_tasks(
    directory: Path = typer.Argument(..., help="A folder of task folders (or one task folder)."),
    task: Optional[list[str]] = typer.Option(
        None, "--task", "-t", help="Only tasks whose name matches (a name or a glob); repeatable."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table (= --format json)."),
    fmt: Optional[str] = FORMAT_OPTION,
) -> None:
    """List the tasks in DIR; broken tasks are shown with their error (exit code 1)."""
    console = _output(fmt, as_json)
    loaded = _load(directory, task)
    if console.fmt == "json":
        _print_json(
            {
                "tasks": [t.summary() for t in loaded.tasks],
                "errors": [e.model_dump(mode="json") for e in loaded.errors],
            }
        )
    else:
        from rich.table import Table

        table = Table(title=f"{len(loaded.tasks)} task(s) in {directory}")
        table.add_column("task", no_wrap=True)
        table.add_column("runs on")
        table.add_column("difficulty")
        table.add_column("category")
        table.add_column("agent", justify="right")
        table.add_column("verifier", justify="right")
        table.add_column("solution")
        table.add_column("tags", overflow="fold")
        for t in loaded.tasks:
            table.add_row(
                t.name, t.runs_on, t.difficulty or "-", t.category or "-",
                f"{t.agent_timeout_sec:g}s", f"{t.verifier_timeout_sec:g}s",
                "yes" if t.has_solution else "no", ", ".join(t.tags) or "-",
            )
        from ahe.tables import optional

        console.print(optional(table, "agent", "verifier", "solution", "runs on"))
        for e in loaded.errors:
            console.print(f"[red]broken[/red] {e.name}: {e.message}", markup=True)
    if loaded.errors:
        raise typer.Exit(1)


_STYLE = {"ok": "green", "warn": "yellow", "fail": "red", "error": "red", "skipped": "yellow"}


def _cell(item) -> str:
    from rich.markup import escape

    label = {"ok": "ok", "warn": "warn", "fail": "FAIL", "error": "ERROR",
             "skipped": "skipped"}[item.status]
    detail = item.detail
    if item.status == "ok":
        text = label if not detail or item.reward is None else f"ok ({detail})"
    elif item.status == "skipped":
        text = detail or label
    else:
        text = f"{label}: {detail}" if detail else label
    return f"[{_STYLE[item.status]}]{escape(text)}[/{_STYLE[item.status]}]"


def _print_check_table(report, directory: Path, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"ahe tasks check {directory}")
    table.add_column("task", no_wrap=True)
    for col in ("load", "oracle", "nop", "leak"):
        table.add_column(col, overflow="fold")
    table.add_column("time", justify="right")
    for r in report.tasks:
        later = [_cell(r.oracle), _cell(r.nop), _cell(r.leak)]
        if r.oracle.status == r.nop.status == r.leak.status == "skipped":
            later[1:] = ["[yellow]skipped[/yellow]"] * 2  # the reason once is enough
        ran = r.oracle.status != "skipped" or r.duration_sec
        table.add_row(escape(r.name), _cell(r.load), *later, f"{r.duration_sec:.1f}s" if ran else "-")
    console.print(table)
    c = report.counts()
    console.print(f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped of {c['total']}")
    if report.benchmark_hash:
        console.print(f"benchmark hash {report.benchmark_hash}")  # what `ahe eval` records for the same tasks


@app.command("check")
def check(
    directory: Path = typer.Argument(..., help="A folder of task folders (or one task folder)."),
    task: Optional[list[str]] = typer.Option(
        None, "--task", "-t", help="Only tasks whose name matches (a name or a glob); repeatable."
    ),
    concurrency: int = typer.Option(4, "--concurrency", "-j", min=1, help="Sandboxes at once."),
    sandbox: str = typer.Option(
        "local", "--sandbox", help="local (docker tasks are skipped) or docker."
    ),
    pass_threshold: float = typer.Option(
        1.0, "--pass-threshold", help="A reward at or above this passes."
    ),
    work_dir: Optional[Path] = typer.Option(
        None, "--work-dir", help="Keep the sandboxes' folders and verifier output here."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table (= --format json)."),
    fmt: Optional[str] = FORMAT_OPTION,
) -> None:
    """Audit tasks: oracle passes, do-nothing fails, tests unreadable before the end.

    Each task runs twice in fresh sandboxes: once with solution/solve.sh, once with no agent
    at all (probing for leaks of the tests first). Exit code 1 when any task fails.
    """
    import asyncio

    from ahe.errors import AheError
    from ahe.tasks.check import check_tasks
    from ahe.tasks.sandboxes import factories_for

    output = _output(fmt, as_json)
    as_json = output.fmt == "json"
    loaded = _load(directory, task)
    try:
        factories = factories_for(sandbox)
    except AheError as exc:
        raise _fail(str(exc)) from None
    if sandbox == "docker" and any(t.runs_on == "docker" for t in loaded.tasks):
        from ahe.sandbox.docker import engine_status

        up, why = engine_status()
        if not up:
            raise _fail(f"--sandbox docker: {why}")

    err = _console(stderr=True)
    done: list[str] = []

    def on_done(result) -> None:
        done.append(result.name)
        if not as_json:
            mark = "[green]ok[/green]" if result.ok else "[red]FAIL[/red]"
            if result.ok and result.skipped:
                mark = "[yellow]skipped[/yellow]"
            err.print(f"  {mark} {result.name} ({result.duration_sec:.1f}s)", markup=True)

    total = len(loaded.tasks) + len(loaded.errors)
    if not as_json:
        err.print(f"checking {total} task(s) in {directory} …")
    report = asyncio.run(
        check_tasks(
            loaded.tasks, factories, load_errors=loaded.errors, concurrency=concurrency,
            pass_threshold=pass_threshold, work_dir=work_dir, on_done=on_done,
        )
    )
    if as_json:
        _print_json(report.to_json())
    else:
        _print_check_table(report, directory, output)
    if not report.ok:
        raise typer.Exit(1)


@app.command("sources")
def sources(as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table (= --format json)."),
            fmt: Optional[str] = FORMAT_OPTION) -> None:
    """List the task sources `--tasks SOURCE:ARG` can name (the default is a folder)."""
    from ahe.tasks.sources import source_infos

    console = _output(fmt, as_json)
    infos = source_infos()
    if console.fmt == "json":
        _print_json([{"name": i.name, "summary": i.summary} for i in infos])
        return
    from rich.table import Table

    table = Table("source", "what it gives", title="task sources")
    for i in infos:
        table.add_row(i.name, i.summary)
    console.print(table)


from ahe.tasks.sources.playground import cli as _playground_cli  # noqa: E402 - typer only at import

app.command("derive")(_playground_cli.derive)
app.command("generate")(_playground_cli.generate)
