"""The `ahe` command line (DESIGN.md §9).

Command bodies import what they need, so `ahe --help` stays fast. Bad input raises
`AheError` (one sentence naming the file, field or flag); `main` prints it without a
traceback and exits 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ahe.errors import AheError, InfrastructureError

app = typer.Typer(
    name="ahe",
    help="Agentic Harness Engineering: evolve a coding agent's harness in a closed, audited loop.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
EXECUTOR_HELP = "Where trials run: local (this machine) or ray (a Ray cluster; docs/scale-out.md)."
FORMAT_HELP = "table (fits the terminal's width), markdown (pipe tables) or json."
RAY_ADDRESS_HELP = "With --executor ray: auto (a cluster started on this machine), host:port, or ray://host:10001."
mock_app = typer.Typer(help="The scripted (mock) OpenAI-compatible model server, for tests and demos.", no_args_is_help=True)
app.add_typer(mock_app, name="mock-llm")


def check_executor(executor: str | None, ray_address: str | None = None) -> str | None:
    if executor is not None and executor not in ("local", "ray"):
        raise AheError(f"--executor must be local or ray, not {executor!r}")
    from ahe.rollout.ray_probe import check_ray_flags

    check_ray_flags(executor, ray_address)  # --executor local --ray-address X: refused, not ignored
    if executor == "ray":  # Ray missing or a wrong address: one sentence before anything starts or is written
        from ahe.rollout.ray_executor import connect

        connect(ray_address)
    return executor


def _register_subapps() -> None:
    from ahe.tasks.cli import app as tasks_app

    app.add_typer(tasks_app, name="tasks", help="List, audit, derive and generate task folders (Harbor / Terminal-Bench 2 format).")


@app.command()
def run(
    workspace: Path = typer.Option(..., "--workspace", "-w", help="Harness folder (agent.yaml, or a harness.yaml naming its backend)."),
    instruction: Optional[str] = typer.Option(None, "--instruction", "-i", help="What to tell the agent."),
    task: Optional[Path] = typer.Option(None, "--task", help="A task folder; its instruction.md and environment/ are used."),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="Host folder mounted at /app (default: <out>/app)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where to write the trace (default: runs/run-<time>)."),
    model: Optional[str] = typer.Option(None, "--model", help="Model name (default: $AHE_MODEL)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)."),
    mock_policy: Optional[Path] = typer.Option(
        None, "--mock-policy", help="Start the scripted MOCK model server with this policy and use it (no real model)."
    ),
    isolation: str = typer.Option("auto", "--isolation", help="Isolation of the local sandbox and of the harness's confined worker: auto, bwrap or none."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Wall-clock limit of the session in seconds."),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="With --task: run the task's verifier afterwards."),
    agent_backend: Optional[str] = typer.Option(None, "--agent-backend", help="Which agent runs the harness (ahe, mini-swe-agent, command, a plugin's); default: the harness's harness.yaml, else ahe."),
) -> None:
    """Run one session of a harness in the local sandbox and print where its trace is."""
    from ahe.run_one import run_one

    if (instruction is None) == (task is None):
        raise AheError("give exactly one of --instruction TEXT or --task DIR")
    summary = run_one(
        workspace=workspace,
        instruction=instruction,
        task_dir=task,
        workdir=workdir,
        out=out,
        model=model,
        base_url=base_url,
        mock_policy=mock_policy,
        isolation=isolation,
        timeout=timeout,
        verify=verify,
        agent_backend=agent_backend,
    )
    if summary.get("stop_reason") == "infra_error":
        raise typer.Exit(1)  # the model endpoint (or the sandbox) failed, not the agent: say so in the exit code


@app.command("eval")
def eval_(
    workspace: Path = typer.Option(..., "--workspace", "-w", help="Harness folder (agent.yaml, or a harness.yaml naming its backend)."),
    tasks: Path = typer.Option(
        ..., "--tasks", help="A folder of task folders (or one task folder), or SOURCE:ARG of a task source (`ahe tasks sources`)."
    ),
    k: int = typer.Option(1, "-k", min=1, help="Trials per task."),
    concurrency: int = typer.Option(4, "--concurrency", "-c", min=1, help="Trials running at once."),
    task: Optional[list[str]] = typer.Option(None, "--task", help="Only these tasks (names or globs); repeatable."),
    out: Optional[Path] = typer.Option(None, "--out", help="Output folder (default: runs/eval-<time>); re-run to resume."),
    model: Optional[str] = typer.Option(None, "--model", help="Model name (default: $AHE_MODEL)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)."),
    mock_policy: Optional[Path] = typer.Option(
        None, "--mock-policy", help="Start the scripted MOCK model server with this policy and use it (no real model)."
    ),
    sandbox: str = typer.Option("local", "--sandbox", help="local (bubblewrap) or docker."),
    isolation: str = typer.Option("auto", "--isolation", help="Isolation of the local sandbox and of the harness's confined worker: auto, bwrap or none."),
    retry_infra: int = typer.Option(0, "--retry-infra", min=0, help="Re-run trials that hit an infrastructure error up to N times."),
    agent_timeout: Optional[float] = typer.Option(None, "--agent-timeout", help="Override every task's agent timeout (s)."),
    keep_app: bool = typer.Option(False, "--keep-app", help="Keep each trial's /app folder after grading."),
    json_out: bool = typer.Option(False, "--json", help="Print results.json instead of tables (= --format json)."),
    executor: str = typer.Option("local", "--executor", help=EXECUTOR_HELP),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    fmt: Optional[str] = typer.Option(None, "--format", help=FORMAT_HELP),
    agent_backend: Optional[str] = typer.Option(None, "--agent-backend", help="Which agent runs the harness (ahe, mini-swe-agent, command, a plugin's); default: the harness's harness.yaml, else ahe."),
) -> None:
    """Evaluate a harness on a task set: k trials per task, then a pass@1 table."""
    from ahe.rollout.eval_command import run_eval
    from ahe.tables import resolve_format

    fmt = resolve_format(fmt, json_out)

    results = run_eval(
        workspace=workspace, tasks=tasks, k=k, concurrency=concurrency, include=task or [], out=out, model=model,
        base_url=base_url, mock_policy=mock_policy, sandbox=sandbox, isolation=isolation, retry_infra=retry_infra,
        agent_timeout=agent_timeout, keep_app=keep_app, json_out=fmt == "json", executor=executor, ray_address=ray_address,
        fmt=fmt, agent_backend=agent_backend,
    )
    raise typer.Exit(0 if results.infra_errors == 0 else 3)


@app.command()
def init(
    directory: Path = typer.Argument(..., help="New experiment folder."),
    tasks: Optional[Path] = typer.Option(None, "--tasks", help="Task folder (default: the bundled examples/tasks)."),
    name: Optional[str] = typer.Option(None, "--name", help="Experiment name (default: the folder name)."),
) -> None:
    """Create an experiment folder: a commented config.yaml and a copy of the seed harness."""
    from ahe.evolution.commands import init_experiment

    path = init_experiment(directory, tasks=tasks, name=name)
    print(path)


@app.command()
def examples(
    directory: Path = typer.Argument(Path("."), help="Where to write harness_workspace/ and examples/ (default: here)."),
) -> None:
    """Copy the seed harness and the bundled examples here, so the docs' commands run as shown."""
    from ahe.resources import copy_bundled

    for path in copy_bundled(directory):
        print(path)


@app.command()
def evolve(
    config: Optional[Path] = typer.Argument(None, help="Experiment config (from `ahe init`)."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Continue a run folder where it stopped."),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="Run folder (default: runs/<name>)."),
    iterations: Optional[int] = typer.Option(None, "--iterations", min=1),
    tasks: Optional[Path] = typer.Option(None, "--tasks"),
    k: Optional[int] = typer.Option(None, "-k", min=1),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", min=1),
    model: Optional[str] = typer.Option(None, "--model", help="The code agent's model."),
    executor: Optional[str] = typer.Option(None, "--executor", help=EXECUTOR_HELP + " Default: the config's."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No live display; print only the run folder."),
    plan_only: bool = typer.Option(False, "--plan", help="Print the forecast (`ahe plan`) and do not run."),
    from_run: Optional[Path] = typer.Option(None, "--from", help="A previous run of the same tasks and harness: the start's forecast (bill.json) is measured there."),
    pilot: int = typer.Option(0, "--pilot", min=0, help="With --plan: run N trials now and forecast from them."),
    prices: Optional[Path] = typer.Option(None, "--prices", help="YAML: model -> {input, output, cached_input} USD per Mtok; prices the forecast and the run's bill (a role's own prices win)."),
    json_out: bool = typer.Option(False, "--json", help="With --plan: the forecast as JSON (as `ahe plan --json`)."),
) -> None:
    """Evolve a harness: rollout, attribution, rollback, debug, evolve — per iteration, resumable."""
    from ahe.evolution.commands import evolve_command

    if plan_only:
        if config is None:
            raise AheError("--plan: give the CONFIG file to plan")
        from ahe.evolution.plan_command import plan_cli

        plan_cli(config, overrides={"iterations": iterations, "tasks": tasks, "k": k, "concurrency": concurrency},
                 source_run=from_run, pilot=pilot, prices_file=prices, json_out=json_out)
        return
    if pilot:
        raise AheError("--pilot N goes with --plan (it runs N trials to forecast from); add --plan, or use `ahe plan --pilot N`")
    if json_out:
        raise AheError("--json goes with --plan (it prints the forecast as JSON); add --plan, or use `ahe plan --json`")
    evolve_command(
        config,
        resume=resume,
        run_dir=run_dir,
        overrides={"iterations": iterations, "tasks": tasks, "k": k, "concurrency": concurrency, "model": model,
                   "executor": check_executor(executor, ray_address), "ray_address": ray_address},
        quiet=quiet,
        forecast_from=from_run,
        prices_file=prices,
    )


@app.command()
def plan(
    config: Path = typer.Argument(..., help="Experiment config (from `ahe init`)."),
    from_run: Optional[Path] = typer.Option(None, "--from", help="A previous run folder of the same tasks and harness: its recorded usage."),
    pilot: int = typer.Option(0, "--pilot", min=0, help="Run N trials now and forecast from them (their cost is shown)."),
    prices: Optional[Path] = typer.Option(None, "--prices", help="YAML: model -> {input, output, cached_input} USD per Mtok."),
    iterations: Optional[int] = typer.Option(None, "--iterations", min=1),
    k: Optional[int] = typer.Option(None, "-k", min=1),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c", min=1),
    json_out: bool = typer.Option(False, "--json", help="The forecast as JSON."),
) -> None:
    """Forecast a run before it starts: trials, tokens per role, dollars, hours, and whether budgets stop it."""
    from ahe.evolution.plan_command import plan_cli

    plan_cli(config, overrides={"iterations": iterations, "k": k, "concurrency": concurrency},
             source_run=from_run, pilot=pilot, prices_file=prices, json_out=json_out)


@app.command()
def demo(
    directory: Path = typer.Argument(Path("runs/demo"), help="Folder for the demo (must be new)."),
    quiet: bool = typer.Option(False, "--quiet", "-q"),
    backend: str = typer.Option("ahe", "--backend", help="The agent backend of the demo's harness: ahe (AHE's "
                                "runtime) or mini-swe-agent (mini's own mini.yaml; the `mini` extra)."),
    search: str = typer.Option("line", "--search", help="line (the paper) or tree (search: tree, docs/search.md)."),
) -> None:
    """Run the whole loop offline on three bundled tasks with scripted MOCK models, then print the run folder."""
    from ahe.demo import run_demo

    run_demo(directory, quiet=quiet, backend=backend, search=search)


@app.command()
def audit(
    run_dir: Path = typer.Argument(..., help="Run folder of `ahe evolve` (runs/<name>)."),
    iteration: Optional[int] = typer.Option(None, "--iteration", min=1, help="Only the changes made by this iteration."),
    json_out: bool = typer.Option(False, "--json", help="Print the audit as JSON (= --format json)."),
    fmt: Optional[str] = typer.Option(None, "--format", help=FORMAT_HELP),
) -> None:
    """Audit a run: each change, its predictions, what happened, the verdict; calibration per iteration and overall."""
    from ahe.report.audit import audit_command
    from ahe.tables import resolve_format

    raise typer.Exit(audit_command(run_dir, iteration, resolve_format(fmt, json_out)))


@app.command()
def simulate(
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="Scenario YAML (docs/decisions.md); default: 89 tasks, k=2, 15% flaky, paper-quality manifests."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder for the run folders and table (default runs/simulate-<scenario>)."),
    seeds: Optional[int] = typer.Option(None, "--seeds", min=1, help="Override the scenario's number of seeds."),
    iterations: Optional[int] = typer.Option(None, "--iterations", min=1, help="Override the scenario's iterations."),
    jobs: Optional[int] = typer.Option(None, "--jobs", min=1, help="Seeds run in parallel (default: up to 4 CPUs)."),
    keep_runs: Optional[str] = typer.Option(None, "--keep-runs", help="Run folders to keep: first (seed), all, none (default: first; with --suite, none)."),
    suite: Optional[str] = typer.Option(None, "--suite", help="Run a scenario suite (a built-in name such as `standard`, or a folder of scenario files) instead of one scenario."),
    seed_range: str = typer.Option("eval", "--seed-range", help="With --suite: dev (seeds 0-999, for tuning) or eval (seeds 1000-1999, for reporting)."),
    policies: Optional[str] = typer.Option(None, "--policies", help="Comma-separated verdict policies to compare (any registered name, plugins included)."),
    table_only: bool = typer.Option(False, "--table-only", help="With --suite: rebuild OUT/suite.md|json from OUT/runs.jsonl (an interrupted suite: the seeds every world finished)."),
    fmt: Optional[str] = typer.Option(None, "--format", help=FORMAT_HELP + " json: the policy rows, no progress."),
    search: Optional[str] = typer.Option(None, "--search", help="Compare search strategies (line, tree-ei, tree-drop, tree-line) at equal budgets (trials and evolve calls, one currency) on tree, standard, all, holdout, holdout2, holdout3 or holdout4 worlds (docs/search.md)."),
) -> None:
    """Judge the verdict policies on simulated worlds with hidden true effects, running the real loop."""
    from ahe.simulate.command import simulate_command, suite_command, suite_table_from_runs
    from ahe.tables import TableOutput, resolve_format

    if keep_runs not in (None, "first", "all", "none"):
        raise AheError(f"--keep-runs {keep_runs}: choose first, all or none")
    output = TableOutput(resolve_format(fmt))  # takes the console's place: progress lines and the table
    names = [p.strip() for p in policies.split(",") if p.strip()] if policies else None
    if search is not None:
        from ahe.simulate.search.compare import search_command

        search_command(search, out, seeds or 20, seed_range, jobs or 2, False, output)
        return
    if suite is not None:
        if scenario is not None or iterations is not None:
            raise AheError("--suite runs the suite's own scenario files: drop --scenario and --iterations")
        if table_only:
            if out is None:
                raise AheError("--table-only needs --out, the folder of the suite run")
            rows = suite_table_from_runs(suite, out.resolve(), seed_range, output)  # type: ignore[arg-type]
        else:
            rows = suite_command(suite, out, seeds, seed_range, names, jobs, keep_runs or "none", output)  # type: ignore[arg-type]
        output.json([r.model_dump() for r in rows])
        return
    rows = simulate_command(scenario, out, seeds, iterations, jobs, keep_runs or "first", output, policies=names)  # type: ignore[arg-type]
    output.json([r.model_dump() for r in rows])


@app.command()
def diff(
    run_dir: Path = typer.Argument(..., help="Run folder of `ahe evolve`."),
    a: str = typer.Argument(..., help="Iteration number (2 → iter-002), tag or commit."),
    b: str = typer.Argument(..., help="Iteration number, tag or commit."),
    json_out: bool = typer.Option(False, "--json", help="Print the diff as JSON."),
) -> None:
    """The harness difference between two iterations or tags, grouped by component, with the changes that made it."""
    from ahe.report.diff import diff_command

    raise typer.Exit(diff_command(run_dir, a, b, json_out))


@app.command()
def transfer(
    harness: str = typer.Option(..., "--harness", help="The frozen harness: RUN_DIR, RUN_DIR@N, RUN_DIR@TAG, a folder, or seed (docs/transfer.md)."),
    baseline: str = typer.Option("seed", "--baseline", help="The baseline harness (same syntax; default: the bundled seed)."),
    models: list[str] = typer.Option(..., "--models", help="Model names, comma-separated (repeatable), or a models YAML file (docs/transfer.md)."),
    tasks: list[Path] = typer.Option(..., "--tasks", help="A task folder; repeat for several benchmarks."),
    k: int = typer.Option(1, "-k", min=1, help="Trials per task."),
    concurrency: int = typer.Option(4, "--concurrency", "-c", min=1, help="Trials running at once."),
    out: Optional[Path] = typer.Option(None, "--out", help="Output folder (default: runs/transfer-<time>); re-run to resume."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)."),
    mock_policy: Optional[Path] = typer.Option(
        None, "--mock-policy", help="Start the scripted MOCK model server with this policy and use it (no real model)."
    ),
    task: Optional[list[str]] = typer.Option(None, "--task", help="Only these tasks (names or globs); repeatable."),
    sandbox: str = typer.Option("local", "--sandbox", help="local (bubblewrap) or docker."),
    isolation: str = typer.Option("auto", "--isolation", help="Isolation of the local sandbox and of the harness's confined worker: auto, bwrap or none."),
    retry_infra: int = typer.Option(0, "--retry-infra", min=0, help="Re-run trials that hit an infrastructure error up to N times."),
    agent_timeout: Optional[float] = typer.Option(None, "--agent-timeout", help="Override every task's agent timeout (s)."),
    json_out: bool = typer.Option(False, "--json", help="Print transfer.json instead of the table (= --format json)."),
    executor: str = typer.Option("local", "--executor", help=EXECUTOR_HELP),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    fmt: Optional[str] = typer.Option(None, "--format", help=FORMAT_HELP),
) -> None:
    """Evaluate a frozen harness against a baseline on several models and task sets, paired per task."""
    from ahe.report.transfer import transfer_command
    from ahe.tables import resolve_format

    fmt = resolve_format(fmt, json_out)

    raise typer.Exit(
        transfer_command(
            harness, baseline, models, tasks, k, concurrency, out, base_url, mock_policy, fmt,
            include=task or [], sandbox=sandbox, isolation=isolation, retry_infra=retry_infra, agent_timeout=agent_timeout,
            executor=check_executor(executor, ray_address), ray_address=ray_address,
        )
    )


@app.command()
def ablate(
    target: str = typer.Argument(..., help="RUN_DIR (its best harness), RUN_DIR@N, RUN_DIR@TAG or a harness folder."),
    tasks: Path = typer.Option(..., "--tasks", help="The task folder to evaluate every variant on."),
    k: int = typer.Option(2, "-k", min=1, help="Trials per task."),
    baseline: Optional[str] = typer.Option(None, "--baseline", help="The seed to ablate against (default: RUN_DIR@0, or the bundled seed)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Output folder (default: RUN_DIR/ablation); re-run to resume."),
    task: Optional[list[str]] = typer.Option(None, "--task", help="Only these tasks (default: the run's include list); repeatable."),
    model: Optional[str] = typer.Option(None, "--model", help="The code agent's model (default: the run's)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (default: the run's)."),
    mock_policy: Optional[Path] = typer.Option(None, "--mock-policy", help="Scripted MOCK model policy (default: the run's, if it used one)."),
    concurrency: int = typer.Option(4, "--concurrency", "-c", min=1, help="Trials running at once."),
    json_out: bool = typer.Option(False, "--json", help="Print ablation.json instead of the table (= --format json)."),
    fmt: Optional[str] = typer.Option(None, "--format", help=FORMAT_HELP),
) -> None:
    """Which component classes carry the gain: seed + only each class, evolved − each class, paired against seed and full."""
    from ahe.experiments.ablate import ablate_command
    from ahe.tables import resolve_format

    fmt = resolve_format(fmt, json_out)
    raise typer.Exit(ablate_command(target, tasks, k, baseline, out, task, model, base_url, mock_policy, concurrency, fmt))


@app.command()
def report(
    run_dir: Path = typer.Argument(..., help="Run folder written by `ahe evolve`."),
    out: Optional[Path] = typer.Option(None, "--out", help="HTML file to write (default: RUN_DIR/report.html)."),
    open_: bool = typer.Option(False, "--open", help="Open the report in the default browser."),
) -> None:
    """Write a self-contained HTML dashboard of a run (works while the run is still going)."""
    from ahe.report.html import report_command

    print(report_command(run_dir, out, open_))


@app.command()
def doctor(
    json_out: bool = typer.Option(False, "--json", help="Print the checks as JSON (= --format json)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Also report this Ray cluster's nodes (default: $RAY_ADDRESS)."),
    fmt: Optional[str] = typer.Option(None, "--format", help=FORMAT_HELP),
) -> None:
    """Check what is installed and reachable, and print the command that fixes each missing piece."""
    from ahe.doctor import run_doctor
    from ahe.tables import resolve_format

    ok = run_doctor(json_out=resolve_format(fmt, json_out), ray_address=ray_address)
    raise typer.Exit(0 if ok else 1)


@app.command()
def debug(
    iteration: Optional[Path] = typer.Argument(None, help="An iteration folder (runs/<exp>/iterations/NNN) or an `ahe eval` output folder."),
    traces: Optional[Path] = typer.Option(None, "--traces", help="Traces made elsewhere (a folder or a file) instead of an iteration."),
    fmt: str = typer.Option("atif", "--format", help="Format of --traces: atif, nexau or openai."),
    out: Optional[Path] = typer.Option(None, "--out", help="With --traces: output folder (default: runs/debug-<time>)."),
    previous: Optional[Path] = typer.Option(None, "--previous", help="Previous iteration, for flips (default: the sibling NNN-1)."),
    model: Optional[str] = typer.Option(None, "--model", help="The debugger's model (default: $AHE_MODEL)."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)."),
    mock_policy: Optional[Path] = typer.Option(
        None, "--mock-policy", help="Start the scripted MOCK model server with this policy and use it (no real model)."
    ),
    concurrency: int = typer.Option(4, "--concurrency", "-c", min=1, help="Tasks analysed at once."),
    no_agent: bool = typer.Option(False, "--no-agent", help="Corpus, facts and facts-based reports only (no model calls)."),
    max_turns: Optional[int] = typer.Option(None, "--max-turns", min=1, help="Debugger turns per task (default 30)."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1000, help="Debugger tokens per task (default 400000)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Debugger wall-clock seconds per task (default 600)."),
    json_out: bool = typer.Option(False, "--json", help="Print the phase summary as JSON."),
) -> None:
    """Clean traces into a corpus, compute facts, write per-task reports and the failure overview."""
    from debugger.cli import run_debug_command

    code = run_debug_command(
        iteration=iteration, traces=traces, fmt=fmt, out=out, previous=previous, model=model, base_url=base_url,
        mock_policy=mock_policy, concurrency=concurrency, no_agent=no_agent, max_turns=max_turns,
        max_tokens=max_tokens, timeout=timeout, json_out=json_out,
    )
    raise typer.Exit(code)


@mock_app.command("serve")
def mock_serve(
    policy: Path = typer.Option(..., "--policy", help="Policy YAML file (see docs/mock-policy.md)."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port"),
) -> None:
    """Serve the scripted MOCK model over HTTP (OpenAI chat completions) until Ctrl-C."""
    from ahe.testing.cli import serve

    serve(policy, host, port)


def main() -> None:
    from ahe.tempdirs import sweep_stale

    sweep_stale()  # temporary folders of AHE processes that were killed outright
    import warnings

    from ahe.errors import UnconfinedWarning

    warnings.simplefilter("ignore", UnconfinedWarning)  # the log says it once; the warnings copy printed it twice
    _register_subapps()
    from rich.markup import escape  # a message's own [brackets] (pip install 'ahe[ray]') are text, not markup

    try:
        app()
    except AheError as exc:
        from rich.console import Console

        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        sys.exit(2)
    except InfrastructureError as exc:
        from rich.console import Console

        Console(stderr=True, soft_wrap=True).print(f"[bold red]infrastructure error ({exc.kind}):[/] {escape(str(exc))}", highlight=False)
        sys.exit(3)
    except OSError as exc:
        from ahe.errors import disk_error_sentence

        sentence = disk_error_sentence(exc)
        if sentence is None:
            raise
        from rich.console import Console

        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(sentence)}", highlight=False)
        sys.exit(4)


if __name__ == "__main__":
    main()
