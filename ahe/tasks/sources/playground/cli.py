"""`ahe tasks derive` and `ahe tasks generate` (registered on the `ahe tasks` app).

Module-level imports stay cheap (typer only); the work is imported inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


FORMAT_HELP = "table (fits the terminal's width), markdown (pipe tables) or json."


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def _fail(message: str, code: int = 2) -> typer.Exit:
    from rich.markup import escape

    _console(stderr=True).print(f"[red]error:[/red] {escape(message)}", markup=True)
    return typer.Exit(code)


def _summary_table(report, title: str):
    from rich.table import Table

    table = Table(title=title)
    table.add_column("split")
    for kind in ("implement", "library", "fix", "reproduce"):
        table.add_column(kind, justify="right")
    table.add_column("total", justify="right")
    splits = sorted({t.split for t in report.tasks})
    for split in splits:
        row = [t for t in report.tasks if t.split == split]
        projects = sorted({t.project for t in row})
        counts = [sum(t.kind == k for t in row) for k in ("implement", "library", "fix", "reproduce")]
        table.add_row(f"{split} ({', '.join(projects)})", *map(str, counts), str(len(row)))
    return table


def derive(
    project: list[Path] = typer.Option(..., "--project", "-p", help="A project folder (with playground.toml) or a folder of them; repeatable."),
    out: Path = typer.Option(..., "--out", "-o", help="Where to write the task folders (new, empty, or an earlier derive's output)."),
    holdout: float = typer.Option(0.0, "--holdout", help="Share of projects held out (e.g. 0.3): tasks go to OUT/train and OUT/holdout."),
    max_fix: int = typer.Option(6, "--max-fix", min=0, help="fix tasks per project at most."),
    max_reproduce: int = typer.Option(3, "--max-reproduce", min=0, help="reproduce tasks per project at most."),
    max_mutants: int = typer.Option(60, "--max-mutants", min=0, help="Mutants tried per project at most."),
    concurrency: int = typer.Option(2, "--concurrency", "-j", min=1, help="Test runs at once."),
    as_json: bool = typer.Option(False, "--json", help="Print the derivation report as JSON (= --format json)."),
    fmt: Optional[str] = typer.Option(None, "--format", help=FORMAT_HELP),
) -> None:
    """Derive verified tasks (implement, library, fix, reproduce) from playground projects — no model needed.

    Every candidate is checked by running the project's tests in a local sandbox; what is not
    emitted is logged with its reason in OUT/derive.json. Check the result with `ahe tasks check`.
    """
    import json

    from ahe.errors import AheError
    from ahe.tasks.sources.playground.derive import DeriveLimits
    from ahe.tasks.sources.playground.taskset import derive_task_set

    from ahe.tables import TableOutput, resolve_format

    console = TableOutput(resolve_format(fmt, as_json), _console())
    as_json = console.fmt == "json"
    err = _console(stderr=True)
    try:
        limits = DeriveLimits(max_fix=max_fix, max_reproduce=max_reproduce, max_mutants_tried=max_mutants)
        report = derive_task_set(project, out, holdout=holdout, limits=limits, concurrency=concurrency,
                                 log=(lambda s: None) if as_json else (lambda s: err.print(f"  {s}")))
    except AheError as exc:
        raise _fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json"), indent=2))
        return
    console.print(_summary_table(report, f"{len(report.tasks)} task(s) derived into {out}"))
    console.print(f"{len(report.rejected)} candidate(s) rejected, {report.mutants_tried} mutant(s) tried, "
                  f"{report.test_runs} test run(s), {report.duration_sec:.1f}s; the log is {out / 'derive.json'}")
    dirs = report.split_dirs(out)
    check = " and ".join(f"`ahe tasks check {d}`" for d in dirs.values())
    console.print(f"next: {check}")


def generate(
    out: Path = typer.Option(..., "--out", "-o", help="The generation folder (created, or resumed when it exists)."),
    projects: int = typer.Option(2, "--projects", "-n", min=1, help="How many projects to propose and build."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="The generator's model (default: AHE_MODEL)."),
    mock_policy: Optional[Path] = typer.Option(None, "--mock-policy", help="Serve this MOCK policy and use it as the model (tests, demos)."),
    holdout: float = typer.Option(0.0, "--holdout", help="Share of projects held out when deriving the tasks."),
    price_input: Optional[float] = typer.Option(None, "--price-input", help="USD per million prompt tokens (for the cost)."),
    price_output: Optional[float] = typer.Option(None, "--price-output", help="USD per million completion tokens."),
    fmt: Optional[str] = typer.Option(None, "--format", help=FORMAT_HELP + " json: OUT/generation.json."),
) -> None:
    """Generate projects, tasks, tests and references with a model, then derive verified tasks.

    Each model stage is a session of the `generator` role working in a sandbox; a finished stage
    is never redone, so running the same command again resumes where it stopped.
    """
    from ahe.errors import AheError
    from ahe.tasks.sources.playground.generate.pipeline import GenerateOptions, run_generate

    from ahe.tables import TableOutput, resolve_format

    console = TableOutput(resolve_format(fmt), _console())
    opts = GenerateOptions(out=out, projects=projects, model=model, mock_policy=mock_policy, holdout=holdout,
                           price_input=price_input, price_output=price_output)
    try:
        summary = run_generate(opts, console=_console(stderr=True))
    except AheError as exc:
        raise _fail(str(exc)) from None
    console.print(summary)
    if console.fmt == "json":
        typer.echo((out / "generation.json").read_text(encoding="utf-8").rstrip())
