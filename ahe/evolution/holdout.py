"""Gains that hold outside the search (issue 36 item 6, docs/config.md#holdout).

With `holdout:` in the experiment, the tasks are split once at the run's start:

    RUN/holdout/split.json          which tasks are searched on, which are held out, and why
    RUN/holdout/search-tasks/       copies of the search tasks: the only folder any phase sees
    RUN/holdout/<seed|best>/        the held-out trials of the seed and of the returned `best`
    RUN/holdout/result.json         both scores, the gain with a paired 95 % interval

Every phase (rollout, debugger, evolve agent and its gate, attribution, re-evaluation, H_best)
works on the search folder, so no held-out task name reaches evidence, prompts or manifests.
After the loop ends, `best` and the seed are scored once on the held-out tasks (k trials each);
a finished result.json is never scored again, and a killed scoring resumes trial by trial.

A SWE-Playground task set derived with `--holdout` is already split by project
(OUT/train, OUT/holdout): evolving on its train split with `holdout:` set uses that marking.
"""

from __future__ import annotations

import hashlib
import math
import random
import shutil
import subprocess
from pathlib import Path

from pydantic import BaseModel, Field

from ahe.config import ExperimentConfig, HoldoutSettings
from ahe.errors import AheError
from ahe.io import atomic_write_json
from ahe.run_folder import RunFolder

PLAYGROUND = "SWE-Playground --holdout (by project)"


class Split(BaseModel):
    source: str  # how the held-out tasks were chosen
    tasks_dir: Path  # the folder the held-out tasks are run from
    search_dir: Path  # the folder every phase of the loop sees
    search: list[str]
    held_out: list[str]


class HarnessScore(BaseModel):
    label: str  # seed or best
    commit: str
    iteration: int | None = None  # the round that produced it (0: the seed)
    pass_at_1: float
    n_trials: int
    n_passed: int
    infra_errors: int = 0
    per_task: dict[str, float] = Field(default_factory=dict)


class HoldoutResult(BaseModel):
    source: str
    search_tasks: int
    held_out: list[str]
    k: int
    seed: HarnessScore
    best: HarnessScore
    gain_points: float  # held-out pass@1 of best minus seed, in points
    ci95_points: tuple[float | None, float | None]  # paired bootstrap over the held-out tasks
    search_seed: float | None = None  # pass@1 of the seed and of best on the search split (the loop's own numbers)
    search_best: float | None = None

    @property
    def search_gain_points(self) -> float | None:
        return None if self.search_seed is None or self.search_best is None else 100 * (self.search_best - self.search_seed)


def holdout_dir(run: RunFolder) -> Path:
    return run.root / "holdout"


# ---------------------------------------------------------------------------- the split
def held_out_count(n: int, share: float) -> int:
    return math.floor(share * n + 0.5)


def choose_held_out(names: list[str], settings: HoldoutSettings) -> tuple[list[str], str]:
    """(held-out names, how chosen); one sentence naming the field when the split cannot be made."""
    if settings.tasks:
        unknown = sorted(set(settings.tasks) - set(names))
        if unknown:
            raise AheError(f"holdout.tasks: {', '.join(unknown[:5])} is not a task of this run; name tasks of the task folder.")
        held, how = sorted(set(settings.tasks)), "holdout.tasks"
    else:
        n = held_out_count(len(names), settings.share)
        ranked = sorted(names, key=lambda t: hashlib.sha256(f"{settings.seed}:{t}".encode()).hexdigest())
        held, how = sorted(ranked[:n]), f"share {settings.share:g} (seed {settings.seed})"
    if len(held) < 1 or len(names) - len(held) < 2:
        raise AheError(f"holdout: {how} of {len(names)} tasks leaves {len(held)} held out and {len(names) - len(held)} to "
                       "search on; a held-out split needs at least 1 held-out task and 2 search tasks — raise holdout.share, "
                       "name holdout.tasks, add tasks, or remove `holdout:` from the config.")
    return held, how


def _playground_split(tasks_dir: Path) -> tuple[Path, Path] | None:
    """(train folder, holdout folder) when the tasks are (one side of) a playground split."""
    import json

    root = tasks_dir.parent if tasks_dir.name in ("train", "holdout") else tasks_dir
    try:
        derive = json.loads((root / "derive.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not derive.get("holdout") or not (root / "holdout").is_dir():
        return None
    if tasks_dir.name == "holdout":
        raise AheError(f"tasks: {tasks_dir} is the held-out side of a SWE-Playground split; evolve on its train split "
                       "(playground:DIR?split=train) so that the held-out projects stay sealed.")
    return root / "train", root / "holdout"


def _names(folder: Path, include: list[str]) -> list[str]:
    from ahe.tasks import load_tasks

    return sorted(t.name for t in load_tasks(folder, include=include or None).tasks)


def prepare_split(cfg: ExperimentConfig, tasks_dir: Path, run: RunFolder) -> Split | None:
    """The run's split (made once, then read back from split.json), its search folder ready."""
    if cfg.holdout is None:
        return None
    path = holdout_dir(run) / "split.json"
    if path.is_file():
        split = Split.model_validate_json(path.read_text(encoding="utf-8"))
    else:
        split = _make_split(cfg, cfg.holdout, tasks_dir, run)
        atomic_write_json(path, split.model_dump(mode="json"))
    if split.source != PLAYGROUND:
        _copy_search_tasks(split)
    return split


def _make_split(cfg: ExperimentConfig, settings: HoldoutSettings, tasks_dir: Path, run: RunFolder) -> Split:
    marked = _playground_split(tasks_dir)
    if marked is not None:
        if settings.tasks or "share" in settings.model_fields_set:
            raise AheError("holdout: the tasks are a SWE-Playground split that already holds out whole projects; "
                           "leave holdout.share and holdout.tasks out (write `holdout: {}`) so that split is used.")
        train, held = marked
        return Split(source=PLAYGROUND, tasks_dir=held, search_dir=train, search=_names(train, cfg.include),
                     held_out=_names(held, []))
    names = _names(tasks_dir, cfg.include)
    held, how = choose_held_out(names, settings)
    return Split(source=how, tasks_dir=tasks_dir, search_dir=holdout_dir(run) / "search-tasks",
                 search=[t for t in names if t not in held], held_out=held)


def _copy_search_tasks(split: Split) -> None:
    """The search tasks copied into their own folder (idempotent: a finished copy is kept)."""
    from ahe.tasks import load_tasks

    folders = {t.name: Path(t.path) for t in load_tasks(split.tasks_dir, include=split.search).tasks}
    missing = sorted(set(split.search) - set(folders))
    if missing:
        raise AheError(f"holdout/split.json: search task {missing[0]} is no longer in {split.tasks_dir}; a run's tasks "
                       "cannot change after it started — restore the task folder, or start a new run.")
    split.search_dir.mkdir(parents=True, exist_ok=True)
    for name in split.search:
        dest = split.search_dir / folders[name].name
        if not dest.exists():
            tmp = dest.with_name(f".{dest.name}.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(folders[name], tmp, symlinks=True)
            tmp.rename(dest)


def held_out_trials(cfg: ExperimentConfig, tasks: int) -> int:
    """Trials the held-out scoring spends (seed and best, k each), for the forecast and the bill."""
    if cfg.holdout is None:
        return 0
    s = cfg.holdout
    return _scoring_trials(cfg, len(s.tasks) if s.tasks else held_out_count(tasks, s.share))


def _scoring_trials(cfg: ExperimentConfig, held: int) -> int:
    """Seed and best, k trials each, on `held` tasks."""
    return 2 * held * (cfg.holdout.k or cfg.k)


def trials_to_come(cfg: ExperimentConfig, split: Split | None, run: RunFolder) -> int:
    """Held-out trials the run still owes (0 once RUN/holdout/result.json is written): the loop keeps
    them out of its budget, so a run stopped by a budget still scores `best` on the split inside it."""
    if split is None or cfg.holdout is None or (holdout_dir(run) / "result.json").is_file():
        return 0
    return _scoring_trials(cfg, len(split.held_out))


def search_tasks(cfg: ExperimentConfig, tasks: int) -> int:
    """Tasks the loop's own rounds run: all of them less the held-out share."""
    if cfg.holdout is None:
        return tasks
    return tasks - (len(cfg.holdout.tasks) if cfg.holdout.tasks else held_out_count(tasks, cfg.holdout.share))


def paired_ci(diffs: list[float], samples: int = 2000, seed: int = 0) -> tuple[float | None, float | None]:
    """Percentile bootstrap 95 % interval of the mean per-task difference (tasks resampled)."""
    n = len(diffs)
    if n == 0:
        return None, None
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(samples))
    return round(means[int(0.025 * samples)], 3), round(means[int(0.975 * samples) - 1], 3)


def extract(repo_path: Path, commit: str, dest: Path) -> Path:
    """The files of `commit` in `dest` (a git archive), once."""
    stamp = dest / ".ahe-commit"
    if stamp.is_file() and stamp.read_text().strip() == commit:
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo_path), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True, capture_output=True)
    stamp.write_text(commit + "\n")
    return dest


def search_folder(cfg: ExperimentConfig, tasks_dir: Path, run: RunFolder) -> tuple[Split | None, Path]:
    """(the split, the folder every phase sees); a playground held-out folder is sealed with the rest."""
    split = prepare_split(cfg, tasks_dir, run)
    if split is None:
        return None, tasks_dir
    if split.source == PLAYGROUND:
        from ahe.tasks import load_tasks
        from ahe.tasks.snapshot import seal_tasks

        seal_tasks(load_tasks(split.tasks_dir).tasks, run.sealed)
    return split, split.search_dir


def check_before_start(cfg: ExperimentConfig) -> None:
    """A split that cannot be made fails before the run folder is made (a task folder; a task
    source's tasks exist only once the run produces them, and are checked then)."""
    from ahe.tasks.sources import is_source_spec

    if cfg.holdout is None or is_source_spec(cfg.tasks) or not Path(cfg.tasks).is_dir():
        return
    if _playground_split(Path(cfg.tasks)) is None:
        choose_held_out(_names(Path(cfg.tasks), cfg.include), cfg.holdout)
