"""`ahe init` and `ahe evolve`: create an experiment, run or resume its loop."""

from __future__ import annotations

import shutil
from pathlib import Path

import jinja2
from rich.console import Console
from rich.markup import escape

from ahe.config import ExperimentConfig, load_experiment_config
from ahe.errors import AheError, raise_if_disk_full
from ahe.evolution.loop import SEED_DEFAULT, run_evolution
from ahe.resources import example_tasks

TEMPLATE = Path(__file__).with_name("init_template.yaml")


def init_experiment(directory: Path, *, tasks: Path | None, name: str | None) -> Path:
    """A new experiment folder: a commented config.yaml and a copy of the seed workspace."""
    if directory.exists() and any(directory.iterdir()):
        raise AheError(f"{directory}: exists and is not empty; choose a new folder")
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copytree(SEED_DEFAULT, directory / "seed_workspace", ignore=shutil.ignore_patterns("__pycache__"))
    default_tasks = example_tasks()
    tasks_value = tasks.resolve() if tasks else default_tasks
    text = jinja2.Template(TEMPLATE.read_text(), keep_trailing_newline=True).render(
        name=name or directory.resolve().name, tasks=str(tasks_value), config_name=str(directory / "config.yaml")
    )
    (directory / "config.yaml").write_text(text)
    return directory / "config.yaml"


def _check_executor(cfg: ExperimentConfig, updates: dict) -> None:
    """Ray missing, a wrong address, an address the local executor would ignore, or a sandbox
    backend that cannot run here: one sentence before a run folder is made (not after it,
    mid-iteration)."""
    from ahe.rollout.ray_probe import check_ray_flags

    if cfg.executor == "ray":
        from ahe.rollout.ray_executor import connect

        connect(cfg.ray_address)
    else:
        check_ray_flags(cfg.executor, updates.get("ray_address"))
        from ahe.tasks.sandboxes import ready_backend

        ready_backend(cfg.sandbox, cfg.isolation)  # e.g. docker with no engine: now, not in every trial


def with_prices(cfg: ExperimentConfig, prices_file: Path | None) -> ExperimentConfig:
    """--prices FILE for a run: every role gets the file's prices under its own (a role's own win); the
    run folder's experiment.yaml keeps them, so a resumed run bills the same."""
    if prices_file is None:
        return cfg
    from ahe.evolution.forecast_build import apply_prices, load_prices

    return apply_prices(cfg, load_prices(prices_file))


def evolve_command(
    config: Path | None,
    *,
    resume: Path | None,
    run_dir: Path | None,
    overrides: dict,
    quiet: bool = False,
    forecast_from: Path | None = None,
    prices_file: Path | None = None,
) -> Path:
    console = Console(stderr=True, quiet=quiet, soft_wrap=True)  # whole lines in a log file
    if resume is not None:
        exp = resume / "experiment.yaml"
        if not exp.exists():
            raise AheError(f"--resume {resume}: no experiment.yaml there; is it a run folder made by `ahe evolve`?")
        cfg = load_experiment_config(exp)
        target = resume
    else:
        if config is None:
            raise AheError("give a CONFIG file (make one with `ahe init DIR`) or --resume RUN_DIR")
        cfg = load_experiment_config(config)
        target = run_dir or Path("runs") / cfg.name
    updates = {k: v for k, v in overrides.items() if v is not None}
    if "model" in updates:
        model = updates.pop("model")
        cfg = cfg.model_copy(update={"models": cfg.models.model_copy(update={"agent": cfg.models.agent.model_copy(update={"model": model})})})
    if "tasks" in updates:
        updates["tasks"] = Path(updates["tasks"]).resolve()
    cfg = with_prices(ExperimentConfig.model_validate({**cfg.model_dump(), **updates}), prices_file)
    if not Path(cfg.tasks).is_dir():  # before a run folder is made for nothing
        where = "--tasks" if "tasks" in updates else f"{exp if resume is not None else config}: tasks"
        raise AheError(f"{where}: {cfg.tasks} is not a folder; point it at a folder of task folders (each with a task.toml)")
    _check_executor(cfg, updates)
    if forecast_from is not None:
        if not forecast_from.is_dir():
            raise AheError(f"--from {forecast_from}: not a folder; give a run folder made by `ahe evolve`")
        from ahe.evolution.forecast_sources import run_costs

        run_costs(forecast_from)  # not a run folder, or nothing evaluated yet: one sentence, before a run folder is made
    try:
        state = run_evolution(cfg, target, resume=resume is not None, console=console, forecast_from=forecast_from)
    except OSError as exc:
        raise_if_disk_full(exc, target)
        raise
    if state.finished:
        console.print(f"[bold]done:[/] {escape(f'{state.stopped}. Run folder: {target}')}")
    print(target)
    return target
