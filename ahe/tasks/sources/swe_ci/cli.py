"""`ahe tasks make swe-ci` and `ahe tasks import swe-ci` (mounted by ahe/tasks/cli.py).

Module-level imports stay cheap (typer only); the task maker, git and docker are imported
inside the commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

make_app = typer.Typer(help="Make task folders from a task source.", no_args_is_help=True, add_completion=False)
import_app = typer.Typer(help="Import a published benchmark as task folders.", no_args_is_help=True,
                         add_completion=False)


@make_app.callback()
def _make() -> None:
    """Make task folders from a task source (`swe-ci`: a git repository's base and target commits)."""


@import_app.callback()
def _import() -> None:
    """Import a published benchmark's own layout as task folders (`swe-ci`)."""


def _ci(rounds: Optional[int], gamma: float):
    from ahe.errors import AheError
    from ahe.tasks.sources.swe_ci.layout import CISettings

    if gamma < 1:
        raise AheError(f"--gamma must be at least 1 (EvoScore weights later rounds more), not {gamma}.")
    return CISettings(rounds=rounds, gamma=gamma) if rounds else None


FORMAT_OPTION = typer.Option(None, "--format", help="table (fits the terminal's width), markdown (pipe tables) or json.")


def _print(results, as_json: bool, fmt: Optional[str] = None) -> int:
    from rich.table import Table

    from ahe.tables import TableOutput, resolve_format

    out = TableOutput(resolve_format(fmt, as_json))
    out.json([r.model_dump(mode="json") for r in results])
    table = Table("task", "n(c0)", "n(c*)", "gap", "skipped", "kept", "where / why not", title="SWE-CI tasks")
    for r in results:
        table.add_row(r.name, str(r.n_base), str(r.n_target), str(r.gap), str(r.skipped), "yes" if r.kept else "no",
                      str(r.path) if r.kept else r.reason)
    out.print(table)
    for r in results:
        if r.runner:
            env = f"; test environment {r.test_env} ({r.env_seconds:.1f} s)" if r.test_env else ""
            out.print(f"{r.name}: tests run by {r.runner}{env}", markup=False, highlight=False)
    return sum(1 for r in results if r.kept)


@make_app.command("swe-ci")
def make_swe_ci(
    repo: Optional[Path] = typer.Option(None, "--repo", help="A git repository (a clone; it is never modified)."),
    base: Optional[str] = typer.Option(None, "--base", help="The base commit c0 the agent starts from."),
    target: Optional[str] = typer.Option(None, "--target", help="The target commit c* whose tests define the goal."),
    csv_file: Optional[Path] = typer.Option(None, "--csv", help="Many tasks: a CSV with columns repo,base,target[,name]."),
    out: Path = typer.Option(..., "--out", help="Where to write the task folders."),
    name: Optional[str] = typer.Option(None, "--name", help="Task name (default: <repo>-<base7>-<target7>)."),
    tests_dir: Optional[list[str]] = typer.Option(None, "--tests-dir", help="Test folder(s) of the repository (default: tests); repeatable."),
    test_command: Optional[str] = typer.Option(None, "--test-command", help="Shell command that writes JUnit XML to $AHE_JUNIT_XML (default: pytest when the project uses it, else unittest)."),
    setup: Optional[str] = typer.Option(None, "--setup", help="Shell command that completes the test environment (run once per repository, with its pip)."),
    test_env: str = typer.Option("auto", "--test-env", help="auto: make the repository's test environment from its declared dependencies; none: the sandbox's python3 only."),
    install_project: bool = typer.Option(True, "--install-project/--no-install-project", help="Add what installing the project adds to each commit's tree, as tox does: the files its build writes (a version file) and its metadata (built once per commit with pip wheel, build dependencies from pip's index)."),
    base_image: Optional[str] = typer.Option(None, "--base-image", help="--sandbox docker: the image the generated Dockerfile starts FROM (default python:3.11-slim)."),
    min_gap: int = typer.Option(5, "--min-gap", min=1, help="Keep a task only when n(c*) - n(c0) reaches this (the paper: 5)."),
    rounds: Optional[int] = typer.Option(None, "--rounds", min=1, help="Make it a CI-loop task with this many rounds ([ci] rounds)."),
    gamma: float = typer.Option(1.0, "--gamma", help="EvoScore's γ for the CI loop ([ci] gamma, ≥ 1)."),
    sandbox: str = typer.Option("local", "--sandbox", help="Where the tests are counted (local or docker)."),
    force: bool = typer.Option(False, "--force", help="Replace a task folder that exists."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table (= --format json)."),
    fmt: Optional[str] = FORMAT_OPTION,
) -> None:
    """Make SWE-CI evolution tasks from a git repository's history (base → target commit)."""
    from ahe.errors import AheError
    from ahe.tasks.sandboxes import backend_factory
    from ahe.tasks.sources.swe_ci.maker import MakeResult, make_task, read_batch, validate_batch

    if csv_file is not None and (repo or base or target or name):
        raise AheError("--csv makes every task from its rows; drop --repo, --base, --target and --name, "
                       "or drop --csv to make one task.")
    if csv_file is None and not (repo and base and target):
        raise AheError("give --repo, --base and --target, or --csv FILE with the columns repo,base,target.")
    if test_env not in ("auto", "none"):
        raise AheError(f"--test-env must be auto or none, not {test_env!r}.")
    if setup and test_env == "none":
        raise AheError("--setup completes the test environment; it cannot go with --test-env none.")
    backend_factory(sandbox)  # an unknown backend or an unreachable engine: one sentence, now
    if csv_file:
        rows = validate_batch(read_batch(csv_file), csv_file, out, force)
    else:
        rows = [{"repo": str(repo), "repo_path": str(repo), "base": base, "target": target, "name": name or ""}]
    ci = _ci(rounds, gamma)
    err = _stderr()
    results = []
    for i, row in enumerate(rows, start=1):
        try:
            result = make_task(Path(row["repo_path"]), row["base"], row["target"], out, name=row["name"] or None,
                               test_dirs=tests_dir or None, test_command=test_command, min_gap=min_gap, ci=ci,
                               sandbox=sandbox, force=force, setup=setup, test_env=test_env, base_image=base_image,
                               install_project=install_project,
                               log=lambda s: err.print(f"  {s}", markup=False))
        except AheError as exc:
            if csv_file is None:
                raise
            result = MakeResult(name=row["name"], path=None, reason=str(exc))
        results.append(result)
        if csv_file:
            err.print(f"  {i}/{len(rows)} {result.name}: {'made' if result.kept else 'skipped: ' + result.reason}",
                      markup=False)
    if _print(results, as_json, fmt) == 0:
        raise typer.Exit(1)


def _stderr():
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


@import_app.command("swe-ci")
def import_swe_ci(
    root: Path = typer.Argument(..., help="The dataset root: metadata/<split>.csv and data/<task_id>/{code.zip,image.tar.gz}."),
    out: Path = typer.Option(..., "--out", help="Where to write the task folders."),
    split: str = typer.Option("default", "--split", help="Which metadata/<split>.csv to read."),
    task: Optional[list[str]] = typer.Option(None, "--task", "-t", help="Only these task ids; repeatable."),
    rounds: int = typer.Option(20, "--rounds", min=1, help="CI-loop rounds ([ci] rounds; SWE-CI uses 20)."),
    gamma: float = typer.Option(1.0, "--gamma", help="EvoScore's γ ([ci] gamma, ≥ 1)."),
    tests_dir: Optional[list[str]] = typer.Option(None, "--tests-dir", help="Test folder(s) (default: tests); repeatable."),
    min_gap: int = typer.Option(1, "--min-gap", min=1, help="Keep a task only when its counted gap reaches this."),
    force: bool = typer.Option(False, "--force", help="Replace task folders that exist."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table (= --format json)."),
    fmt: Optional[str] = FORMAT_OPTION,
) -> None:
    """Import the published SWE-CI dataset as docker tasks (needs a Docker engine)."""
    from ahe.tasks.sources.swe_ci.published import import_dataset

    results = import_dataset(root, out, split=split, only=task or None, ci=_ci(rounds, gamma),
                             test_dirs=tests_dir or None, min_gap=min_gap, force=force)
    if _print(results, as_json, fmt) == 0:
        raise typer.Exit(1)
