"""Load Harbor / Terminal-Bench 2 task folders into `Task` objects.

Rules (DESIGN.md §6): unknown keys are ignored, as harbor does; a wrong type, a malformed
task.toml or a missing required file (instruction.md, tests/test.sh) is a `ConfigError` whose
message is one sentence naming the file and the field and saying what to do. `load_tasks`
loads a whole folder and reports broken tasks next to the good ones instead of stopping.
"""

from __future__ import annotations

import fnmatch
import math
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel

from ahe.errors import ConfigError
from ahe.tasks.unchanged import load_unchanged
from ahe.tasks.model import (
    COMPOSE_NAMES,
    DEFAULT_AGENT_TIMEOUT_SEC,
    DEFAULT_BUILD_TIMEOUT_SEC,
    DEFAULT_VERIFIER_TIMEOUT_SEC,
    DOCKERFILE_NAME,
    SETUP_SCRIPT_NAME,
    EnvironmentSpec,
    Task,
)

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT])(?:IB|I|B)?\s*$", re.IGNORECASE)
_SIZE_TO_MB = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 * 1024.0}
_BAD_NAME_CHARS = re.compile(r"[\\/\x00]")


class TaskLoadError(BaseModel):
    """A task folder that could not be loaded, and why (one sentence)."""

    name: str
    path: Path
    message: str


class LoadedTasks(NamedTuple):
    """What `load_tasks` returns: the good tasks (sorted by name) and the broken ones."""

    tasks: list[Task]
    errors: list[TaskLoadError]


# --------------------------------------------------------------------------------------------
# field readers: each returns the value or raises ConfigError naming file and field
# --------------------------------------------------------------------------------------------


class _Reader:
    """Typed access to one parsed task.toml, with errors that name the file and field."""

    def __init__(self, toml_path: Path, data: dict[str, Any]) -> None:
        self.path = toml_path
        self.data = data

    def _fail(self, field: str, problem: str, fix: str) -> ConfigError:
        return ConfigError(f"{self.path}: {field} {problem}; {fix}.")

    def section(self, name: str) -> dict[str, Any]:
        value = self.data.get(name, {})
        if not isinstance(value, dict):
            raise self._fail(
                f"[{name}]", f"must be a table, got {_show(value)}", f"write it as a [{name}] table"
            )
        return value

    @staticmethod
    def _label(section: str | None, key: str) -> str:
        return f"[{section}] {key}" if section else key

    def string(self, section: str | None, key: str) -> str | None:
        table = self.data if section is None else self.section(section)
        value = table.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self._fail(
                self._label(section, key),
                f"must be a string, got {_show(value)}",
                "quote the value",
            )
        return str(value)

    def number(
        self, section: str, key: str, *, default: float | None, positive: bool = True,
        integer: bool = False, unit: str = "",
    ) -> float | None:
        """A number (> 0 when `positive`, else >= 0); numeric strings are accepted like harbor."""
        value = self.section(section).get(key)
        if value is None:
            return default
        kind = "a whole number" if integer else "a number"
        what = f"{'a positive' if positive else 'a non-negative'} {kind[2:]}"
        if unit:
            what += f" of {unit}"
        parsed: float | None = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            parsed = float(value)
        elif isinstance(value, str):
            try:
                parsed = float(value.strip())
            except ValueError:
                parsed = None
        ok = (
            parsed is not None
            and math.isfinite(parsed)
            and (not integer or parsed.is_integer())
            and (parsed > 0 if positive else parsed >= 0)
        )
        if not ok:
            fix = "set it to " + what + " or remove the key to use the default"
            if default is not None:
                fix += f" of {_fmt(default)}"
            raise self._fail(self._label(section, key), f"must be {what}, got {_show(value)}", fix)
        return parsed

    def boolean(self, section: str, key: str) -> bool | None:
        value = self.section(section).get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self._fail(
                self._label(section, key),
                f"must be true or false, got {_show(value)}",
                "write true or false without quotes",
            )
        return value

    def string_list(self, section: str, key: str) -> tuple[str, ...]:
        value = self.section(section).get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._fail(
                self._label(section, key),
                f"must be a list of strings, got {_show(value)}",
                'write it like ["a", "b"]',
            )
        return tuple(value)

    def string_map(self, section: str, key: str) -> dict[str, str]:
        value = self.section(section).get(key)
        if value is None:
            return {}
        label = self._label(section, key)
        if not isinstance(value, dict):
            raise self._fail(
                label, f"must be a table of strings, got {_show(value)}",
                f"write it as [{section}.{key}]"
            )
        out: dict[str, str] = {}
        for k, v in value.items():
            if isinstance(v, bool):
                out[k] = "true" if v else "false"
            elif isinstance(v, (str, int, float)):
                out[k] = str(v)
            else:
                raise self._fail(
                    f"{label}.{k}", f"must be a string, got {_show(v)}", "quote the value"
                )
        return out

    def size_mb(self, section: str, key: str) -> int | None:
        """A size like "2G", "512M" or "10Gi" (TB2's memory / storage) in MiB."""
        value = self.section(section).get(key)
        if value is None:
            return None
        match = _SIZE_RE.match(value) if isinstance(value, str) else None
        if not match:
            raise self._fail(
                self._label(section, key),
                f'must be a size like "2G" or "512M", got {_show(value)}',
                f"write it with a unit (K, M, G) or use {key}_mb",
            )
        mb = float(match.group(1)) * _SIZE_TO_MB[match.group(2).upper()]
        return max(1, int(mb))


def _show(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def _fmt(value: float | None) -> str:
    if value is None:
        return "none"
    return str(int(value)) if float(value).is_integer() else str(value)


# --------------------------------------------------------------------------------------------
# one task
# --------------------------------------------------------------------------------------------


def load_task(path: str | Path) -> Task:
    """Load and validate one task folder; raise `ConfigError` when it is not a valid task."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"{folder}: task folder does not exist; pass a folder holding task.toml.")
    folder = folder.resolve()
    toml_path = folder / "task.toml"
    if not toml_path.is_file():
        raise ConfigError(
            f"{toml_path}: file is missing; every task folder needs a task.toml (it may be empty)."
        )
    try:
        data = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{toml_path}: file is not UTF-8 text; save it as UTF-8.") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{toml_path}: not valid TOML ({exc}); fix the syntax there.") from None

    r = _Reader(toml_path, data)

    # [task] (harbor >= 1.1): name is optional here; "org/name" keeps only the last part.
    full_name = r.string("task", "name")
    name = _task_name(full_name, folder, toml_path)
    description = r.string("task", "description")
    keywords = r.string_list("task", "keywords")
    schema_version = r.string(None, "schema_version") or r.string(None, "version")

    metadata = dict(r.section("metadata"))
    difficulty = r.string("metadata", "difficulty")
    category = r.string("metadata", "category")
    tags = r.string_list("metadata", "tags") or keywords

    agent_timeout = r.number(
        "agent", "timeout_sec", default=DEFAULT_AGENT_TIMEOUT_SEC, unit="seconds"
    )
    verifier_timeout = r.number(
        "verifier", "timeout_sec", default=DEFAULT_VERIFIER_TIMEOUT_SEC, unit="seconds"
    )
    verifier_env = r.string_map("verifier", "env")
    r.section("solution")
    solution_env = r.string_map("solution", "env")

    environment = _environment(r, folder)

    instruction_path = folder / "instruction.md"
    if not instruction_path.is_file():
        raise ConfigError(
            f"{instruction_path}: file is missing; write what the agent must do in instruction.md."
        )
    try:
        instruction = instruction_path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(
            f"{instruction_path}: file is not UTF-8 text; save it as UTF-8."
        ) from None

    test_script = folder / "tests" / "test.sh"
    if not test_script.is_file():
        raise ConfigError(
            f"{test_script}: file is missing; the verifier entry point tests/test.sh must write "
            "/logs/verifier/reward.txt or reward.json."
        )

    return Task(
        name=name,
        path=folder,
        instruction=instruction,
        full_name=full_name,
        description=description,
        schema_version=schema_version,
        difficulty=difficulty,
        category=category,
        tags=tags,
        metadata=metadata,
        agent_timeout_sec=agent_timeout,  # type: ignore[arg-type]
        verifier_timeout_sec=verifier_timeout,  # type: ignore[arg-type]
        verifier_env=verifier_env,
        solution_env=solution_env,
        environment=environment,
    )


def _task_name(full_name: str | None, folder: Path, toml_path: Path) -> str:
    if full_name is None:
        return folder.name
    short = full_name.strip().rsplit("/", 1)[-1].strip()
    if not short or short in {".", ".."} or _BAD_NAME_CHARS.search(short):
        raise ConfigError(
            f"{toml_path}: [task] name {full_name!r} is not a usable task name; use letters, "
            "digits, '-', '_' or '.', optionally after an 'org/' prefix, or remove it to use "
            "the folder name."
        )
    return short


def _environment(r: _Reader, folder: Path) -> EnvironmentSpec:
    section = "environment"
    docker_image = r.string(section, "docker_image")
    if docker_image is not None and not docker_image.strip():
        raise ConfigError(
            f"{r.path}: [environment] docker_image is empty; name an image or remove the key."
        )
    memory_mb = r.number(section, "memory_mb", default=None, integer=True, unit="MiB")
    if memory_mb is None:
        memory_mb = r.size_mb(section, "memory")
    else:
        r.size_mb(section, "memory")  # still type-checked; memory_mb wins
    storage_mb = r.number(section, "storage_mb", default=None, integer=True, unit="MiB")
    if storage_mb is None:
        storage_mb = r.size_mb(section, "storage")
    else:
        r.size_mb(section, "storage")
    gpus = r.number(section, "gpus", default=None, positive=False, integer=True)

    env_dir = folder / "environment"
    dockerfile = env_dir / DOCKERFILE_NAME
    compose = next((env_dir / n for n in COMPOSE_NAMES if (env_dir / n).is_file()), None)
    setup = env_dir / SETUP_SCRIPT_NAME
    return EnvironmentSpec(
        docker_image=docker_image.strip() if docker_image else None,
        dockerfile=dockerfile if dockerfile.is_file() else None,
        compose_file=compose,
        setup_script=setup if setup.is_file() else None,
        cpus=r.number(section, "cpus", default=None, unit="CPUs"),
        memory_mb=int(memory_mb) if memory_mb is not None else None,
        storage_mb=int(storage_mb) if storage_mb is not None else None,
        gpus=int(gpus) if gpus is not None else None,
        build_timeout_sec=r.number(
            section, "build_timeout_sec", default=DEFAULT_BUILD_TIMEOUT_SEC, unit="seconds"
        ),  # type: ignore[arg-type]
        network_mode=r.string(section, "network_mode"),
        allow_internet=r.boolean(section, "allow_internet"),
        env=r.string_map(section, "env"),
        test_env=_test_env(r, folder),
    )


def _test_env(r: _Reader, folder: Path) -> Path | None:
    """[environment] test_env: a made test environment (a folder) for local sandboxes."""
    value = r.string("environment", "test_env")
    return (folder / value).resolve() if value and value.strip() else None


# --------------------------------------------------------------------------------------------
# a folder of tasks
# --------------------------------------------------------------------------------------------


def _looks_like_task(folder: Path) -> bool:
    return (folder / "instruction.md").is_file() or (folder / "tests" / "test.sh").is_file()


def task_folders(directory: str | Path, *, with_broken: bool = False) -> list[Path]:
    """The task folders of `directory`: itself when it has a task.toml, else each direct
    sub-folder with one (hidden and `_` folders skipped), sorted. `with_broken` adds the
    sub-folders that look like a task without a task.toml (so they can be reported)."""
    root = Path(directory).expanduser()
    if (root / "task.toml").is_file():
        return [root]
    if not root.is_dir():
        return []
    return sorted(
        p for p in root.iterdir()
        if p.is_dir() and not p.name.startswith((".", "_")) and p.name != "__pycache__"
        and ((p / "task.toml").is_file() or (with_broken and _looks_like_task(p)))
    )


def load_tasks(
    directory: str | Path,
    *,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
) -> LoadedTasks:
    """Load every task under `directory`; a broken task is reported, never fatal.

    `directory` may be one task folder (it has a task.toml) or a folder of task folders: each
    direct sub-folder with a task.toml is loaded (hidden folders are skipped; a sub-folder
    that has instruction.md or tests/test.sh but no task.toml is reported as broken). Tasks
    come back sorted by name. `include` / `exclude` are names or shell globs (see
    `filter_tasks`). Raises `ConfigError` only when `directory` itself does not exist.
    """
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise ConfigError(f"{root}: tasks folder does not exist; pass a folder of task folders.")
    candidates = task_folders(root.resolve(), with_broken=True)

    tasks: list[Task] = []
    errors: list[TaskLoadError] = []
    by_name: dict[str, Task] = {}
    for folder in candidates:
        try:
            task = load_unchanged(folder, load_task)  # parsed again only when its files changed
        except ConfigError as exc:
            errors.append(TaskLoadError(name=folder.name, path=folder, message=str(exc)))
            continue
        except OSError as exc:  # unreadable file, permission problem …
            errors.append(
                TaskLoadError(
                    name=folder.name, path=folder,
                    message=f"{folder}: could not be read ({exc}); check its permissions.",
                )
            )
            continue
        if task.name in by_name:
            other = by_name[task.name]
            errors.append(
                TaskLoadError(
                    name=folder.name, path=folder,
                    message=(
                        f"{task.task_toml}: [task] name {task.name!r} is already used by "
                        f"{other.path}; give one of them another name."
                    ),
                )
            )
            continue
        by_name[task.name] = task
        tasks.append(task)

    tasks.sort(key=lambda t: t.name)
    errors.sort(key=lambda e: e.name)
    if include or exclude:
        tasks = filter_tasks(tasks, include=include, exclude=exclude)
        errors = [
            e for e in errors if _selected(e.name, include, exclude)
        ]
    return LoadedTasks(tasks, errors)


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def _selected(name: str, include: Sequence[str] | None, exclude: Sequence[str] | None) -> bool:
    if include and not _matches(name, include):
        return False
    return not (exclude and _matches(name, exclude))


def filter_tasks(
    tasks: Iterable[Task],
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
) -> list[Task]:
    """Keep tasks whose name (or folder name) matches any `include` glob and no `exclude` glob.

    Patterns are shell globs (`fix-*`, `*git*`) matched case-sensitively; a plain name
    matches exactly that task. No `include` means every task.
    """
    kept = []
    for task in tasks:
        names = {task.name, task.path.name}
        if include and not any(_matches(n, include) for n in names):
            continue
        if exclude and any(_matches(n, exclude) for n in names):
            continue
        kept.append(task)
    return kept


def unmatched_patterns(tasks: Iterable[Task], patterns: Sequence[str]) -> list[str]:
    """The patterns of `patterns` that select none of `tasks` (for a helpful CLI error)."""
    names = [n for t in tasks for n in (t.name, t.path.name)]
    return [p for p in patterns if not any(fnmatch.fnmatchcase(n, p) for n in names)]


def resolve_env(env: Mapping[str, str], host_env: Mapping[str, str] | None = None,
                *, where: str = "env") -> dict[str, str]:
    """Expand harbor's `${VAR}` and `${VAR:-default}` templates from the host environment.

    Raises `ConfigError` naming `where` and the variable when a `${VAR}` without default is
    not set on the host.
    """
    import os

    host = os.environ if host_env is None else host_env
    pattern = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
    out: dict[str, str] = {}
    for key, value in env.items():
        def sub(m: re.Match[str], key: str = key) -> str:
            var, default = m.group(1), m.group(2)
            if var in host:
                return host[var]
            if default is not None:
                return default
            raise ConfigError(
                f"{where}.{key} needs the host variable {var}, which is not set; export it "
                f"or write ${{{var}:-default}}."
            )

        out[key] = pattern.sub(sub, value)
    return out
