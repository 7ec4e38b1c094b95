"""The task loader: valid tasks, every error path, TB2 / Harbor compatibility, filtering."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from ahe.errors import ConfigError
from ahe.tasks import Task, filter_tasks, load_task, load_tasks, resolve_env

FIXTURES = Path(__file__).parent / "fixtures" / "tasks"


def make_task(
    root: Path,
    name: str = "t",
    toml: str = "",
    *,
    instruction: str | None = "Do the thing.\n",
    test_sh: str | None = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
    solve_sh: str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "task.toml").write_text(textwrap.dedent(toml))
    if instruction is not None:
        (folder / "instruction.md").write_text(instruction)
    if test_sh is not None:
        (folder / "tests").mkdir()
        (folder / "tests" / "test.sh").write_text(test_sh)
    if solve_sh is not None:
        (folder / "solution").mkdir()
        (folder / "solution" / "solve.sh").write_text(solve_sh)
    for rel, text in (files or {}).items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return folder


# ---- valid tasks ---------------------------------------------------------------------------


def test_minimal_task_uses_folder_name_and_defaults(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path, "my-task"))
    assert isinstance(task, Task)
    assert task.name == "my-task"
    assert task.path == (tmp_path / "my-task").resolve()
    assert task.instruction == "Do the thing.\n"
    assert task.agent_timeout_sec == 900.0
    assert task.verifier_timeout_sec == 600.0
    assert task.runs_on == "local"
    assert task.has_solution is False
    assert task.has_setup is False
    assert task.difficulty is None and task.tags == ()
    assert task.environment.wants_network is False


def test_all_known_keys_are_read(tmp_path: Path) -> None:
    folder = make_task(
        tmp_path, "folder-name",
        """
        version = "1.0"
        [task]
        name = "acme/renamed"
        description = "what it is"
        [metadata]
        difficulty = "hard"
        category = "debugging"
        tags = ["a", "b"]
        author_name = "someone"
        [agent]
        timeout_sec = 120
        [verifier]
        timeout_sec = 30.5
        env = { TOKEN = "x", LEVEL = 3 }
        [solution.env]
        HINT = "y"
        [environment]
        cpus = 2
        memory_mb = 512
        storage = "1G"
        gpus = 0
        build_timeout_sec = 90
        network_mode = "no-network"
        env = { MODE = "test" }
        """,
        solve_sh="#!/bin/bash\n",
        files={"environment/setup.sh": "echo hi\n", "environment/data.txt": "x\n"},
    )
    task = load_task(folder)
    assert task.name == "renamed"
    assert task.full_name == "acme/renamed"
    assert task.description == "what it is"
    assert task.schema_version == "1.0"
    assert (task.difficulty, task.category, task.tags) == ("hard", "debugging", ("a", "b"))
    assert task.metadata["author_name"] == "someone"
    assert task.agent_timeout_sec == 120.0
    assert task.verifier_timeout_sec == 30.5
    assert task.verifier_env == {"TOKEN": "x", "LEVEL": "3"}
    assert task.solution_env == {"HINT": "y"}
    env = task.environment
    assert (env.cpus, env.memory_mb, env.storage_mb, env.gpus) == (2.0, 512, 1024, 0)
    assert env.build_timeout_sec == 90.0
    assert env.network_mode == "no-network" and env.wants_network is False
    assert env.env == {"MODE": "test"}
    assert task.runs_on == "local"
    assert task.has_setup and task.has_solution
    assert env.setup_script == folder.resolve() / "environment" / "setup.sh"


def test_unknown_keys_and_tables_are_ignored(tmp_path: Path) -> None:
    folder = make_task(
        tmp_path, "x",
        """
        artifacts = ["a"]
        surprise = 3
        [task]
        keywords = ["k"]
        [[task.authors]]
        name = "n"
        [agent]
        timeout_sec = 10
        user = "agent"
        [environment]
        mcp_servers = []
        healthcheck = { command = "true" }
        [[graders]]
        type = "deterministic"
        [something_new]
        x = { y = [1, 2] }
        """,
    )
    task = load_task(folder)
    assert task.agent_timeout_sec == 10.0
    assert task.tags == ("k",)  # [task] keywords stand in for missing [metadata] tags


@pytest.mark.parametrize(
    "memory, expected",
    [('"2G"', 2048), ('"512M"', 512), ('"4Gi"', 4096), ('"1.5G"', 1536), ('"2gb"', 2048)],
)
def test_memory_sizes_like_tb2(tmp_path: Path, memory: str, expected: int) -> None:
    task = load_task(make_task(tmp_path, "m", f"[environment]\nmemory = {memory}\n"))
    assert task.environment.memory_mb == expected


def test_memory_mb_wins_over_memory(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path, "m", '[environment]\nmemory_mb = 100\nmemory = "2G"\n'))
    assert task.environment.memory_mb == 100


def test_docker_image_or_dockerfile_makes_a_docker_task(tmp_path: Path) -> None:
    image = load_task(make_task(tmp_path, "a", '[environment]\ndocker_image = "img:1"\n'))
    built = load_task(make_task(tmp_path, "b", files={"environment/Dockerfile": "FROM x\n"}))
    compose = load_task(
        make_task(tmp_path, "c", files={"environment/docker-compose.yaml": "services: {}\n"})
    )
    assert image.runs_on == built.runs_on == compose.runs_on == "docker"
    assert image.environment.docker_image == "img:1"
    assert built.environment.dockerfile == (tmp_path / "b" / "environment" / "Dockerfile").resolve()
    # setup.sh belongs to local tasks only: a docker task builds its machine instead
    d = load_task(make_task(tmp_path, "d", '[environment]\ndocker_image = "i"\n',
                            files={"environment/setup.sh": "true\n"}))
    assert d.has_setup is False


@pytest.mark.parametrize(
    "toml, wants",
    [
        ("", False),
        ("[environment]\nallow_internet = true\n", True),
        ("[environment]\nallow_internet = false\n", False),
        ('[environment]\nnetwork_mode = "public"\n', True),
        ('[environment]\nnetwork_mode = "none"\nallow_internet = true\n', False),
    ],
)
def test_network_wish(tmp_path: Path, toml: str, wants: bool) -> None:
    assert load_task(make_task(tmp_path, "n", toml)).environment.wants_network is wants


def test_summary_is_json_ready(tmp_path: Path) -> None:
    import json

    summary = load_task(make_task(tmp_path, "s", '[metadata]\ntags = ["x"]\n')).summary()
    assert json.loads(json.dumps(summary))["name"] == "s"
    assert summary["runs_on"] == "local" and summary["tags"] == ["x"]


# ---- Terminal-Bench 2 / Harbor fixtures ------------------------------------------------------


def test_tb2_style_task_loads_unchanged() -> None:
    task = load_task(FIXTURES / "tb2-style-task")
    assert task.name == "tb2-style-task"
    assert task.schema_version == "1.0"
    assert task.runs_on == "docker"
    assert task.environment.docker_image == "alexgshaw/tb2-style-task:20251031"
    assert task.environment.dockerfile is not None
    assert (task.environment.cpus, task.environment.memory_mb, task.environment.storage_mb) == (
        1.0, 2048, 10240,
    )
    assert task.environment.build_timeout_sec == 600.0
    assert task.agent_timeout_sec == task.verifier_timeout_sec == 900.0
    assert (task.difficulty, task.category) == ("medium", "software-engineering")
    assert task.metadata["expert_time_estimate_min"] == 15.0
    assert task.has_solution
    assert "Fibonacci" in task.instruction


def test_harbor_schema_1_1_task_with_dockerfile_loads() -> None:
    task = load_task(FIXTURES / "harbor-dockerfile-task")
    assert task.name == "harbor-dockerfile-task"
    assert task.full_name == "ahe-fixtures/harbor-dockerfile-task"
    assert task.schema_version == "1.1"
    assert task.runs_on == "docker"
    assert task.environment.docker_image is None
    assert task.environment.dockerfile is not None
    env = task.environment
    assert (env.cpus, env.memory_mb, env.gpus) == (2.0, 4096, 0)
    assert task.environment.allow_internet is False
    assert task.verifier_env == {"GREETING_FILE": "/app/greeting.txt"}
    assert task.solution_env == {"GREETING": "hello, world"}


def test_fixture_folder_loads_without_errors() -> None:
    loaded = load_tasks(FIXTURES)
    assert [t.name for t in loaded.tasks] == ["harbor-dockerfile-task", "tb2-style-task"]
    assert loaded.errors == []


def test_bundled_example_tasks_load() -> None:
    examples = Path(__file__).parent.parent / "examples" / "tasks"
    if not any(examples.glob("*/task.toml")):
        pytest.skip("no bundled example tasks yet")
    loaded = load_tasks(examples)
    assert loaded.tasks, loaded.errors
    for task in loaded.tasks:
        assert task.instruction.strip()


# ---- error paths: one sentence naming the file and the field --------------------------------


def _error(folder: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_task(folder)
    message = str(info.value)
    assert "\n" not in message
    assert "Traceback" not in message
    return message


def test_malformed_toml(tmp_path: Path) -> None:
    msg = _error(make_task(tmp_path, "bad", "[agent\ntimeout_sec = 3\n"))
    assert str(tmp_path / "bad" / "task.toml") in msg
    assert "not valid TOML" in msg and "line 1" in msg


@pytest.mark.parametrize(
    "toml, field, hint",
    [
        ('[agent]\ntimeout_sec = "soon"\n', "[agent] timeout_sec", "number"),
        ("[agent]\ntimeout_sec = -5\n", "[agent] timeout_sec", "positive"),
        ("[verifier]\ntimeout_sec = true\n", "[verifier] timeout_sec", "number"),
        ("[verifier]\ntimeout_sec = nan\n", "[verifier] timeout_sec", "number"),
        ("agent = 5\n", "[agent]", "table"),
        ("[metadata]\ntags = [1, 2]\n", "[metadata] tags", "list of strings"),
        ("[metadata]\ndifficulty = [\"x\"]\n", "[metadata] difficulty", "string"),
        ('[environment]\ncpus = "many"\n', "[environment] cpus", "number"),
        ("[environment]\nmemory_mb = 1.5\n", "[environment] memory_mb", "whole number"),
        ('[environment]\nmemory = "lots"\n', "[environment] memory", "size"),
        ("[environment]\nmemory = 2048\n", "[environment] memory", "size"),
        ('[environment]\nstorage = "10X"\n', "[environment] storage", "size"),
        ('[environment]\nallow_internet = "yes"\n', "[environment] allow_internet",
         "true or false"),
        ("[environment]\ndocker_image = 3.5\n", None, None),  # numbers become strings: fine
        ('[environment]\ndocker_image = ""\n', "[environment] docker_image", "empty"),
        ("[environment]\nenv = [1]\n", "[environment] env", "table"),
        ("[verifier.env]\nX = [1]\n", "[verifier] env.X", "string"),
        ('[task]\nname = "org/"\n', "[task] name", "usable"),
        ('[task]\nname = ".."\n', "[task] name", "usable"),
    ],
)
def test_wrong_types_name_file_and_field(tmp_path: Path, toml: str, field: str | None,
                                         hint: str | None) -> None:
    folder = make_task(tmp_path, "x", toml)
    if field is None:
        load_task(folder)
        return
    msg = _error(folder)
    assert msg.startswith(str(tmp_path / "x" / "task.toml") + ":"), msg
    assert field in msg, msg
    assert hint in msg, msg
    assert msg.rstrip().endswith("."), msg


def test_missing_instruction(tmp_path: Path) -> None:
    msg = _error(make_task(tmp_path, "x", instruction=None))
    assert str(tmp_path / "x" / "instruction.md") in msg and "missing" in msg


def test_missing_test_sh(tmp_path: Path) -> None:
    msg = _error(make_task(tmp_path, "x", test_sh=None))
    assert str(tmp_path / "x" / "tests" / "test.sh") in msg and "missing" in msg


def test_missing_task_toml(tmp_path: Path) -> None:
    folder = make_task(tmp_path, "x")
    (folder / "task.toml").unlink()
    msg = _error(folder)
    assert "task.toml" in msg and "missing" in msg


def test_missing_folder(tmp_path: Path) -> None:
    msg = _error(tmp_path / "nope")
    assert "does not exist" in msg


def test_instruction_not_utf8(tmp_path: Path) -> None:
    folder = make_task(tmp_path, "x")
    (folder / "instruction.md").write_bytes(b"\xff\xfe\x00bad")
    assert "UTF-8" in _error(folder)


# ---- load_tasks: broken tasks are reported, others still load --------------------------------


def test_load_tasks_reports_broken_and_keeps_the_rest(tmp_path: Path) -> None:
    make_task(tmp_path, "b-good")
    make_task(tmp_path, "a-good", '[metadata]\ndifficulty = "easy"\n')
    make_task(tmp_path, "c-bad-toml", "[agent\n")
    make_task(tmp_path, "d-no-tests", test_sh=None)
    # looks like a task but has no task.toml
    (tmp_path / "e-no-toml").mkdir()
    (tmp_path / "e-no-toml" / "instruction.md").write_text("x")
    # ignored: not a task at all, hidden, a plain file
    (tmp_path / "notes").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "README.md").write_text("hi")

    tasks, errors = load_tasks(tmp_path)
    assert [t.name for t in tasks] == ["a-good", "b-good"]
    assert [e.name for e in errors] == ["c-bad-toml", "d-no-tests", "e-no-toml"]
    assert "not valid TOML" in errors[0].message
    assert "test.sh" in errors[1].message
    assert "task.toml" in errors[2].message


def test_load_tasks_on_a_single_task_folder(tmp_path: Path) -> None:
    folder = make_task(tmp_path, "solo")
    loaded = load_tasks(folder)
    assert [t.name for t in loaded.tasks] == ["solo"] and loaded.errors == []


def test_load_tasks_duplicate_names(tmp_path: Path) -> None:
    make_task(tmp_path, "one", '[task]\nname = "org/same"\n')
    make_task(tmp_path, "two", '[task]\nname = "other/same"\n')
    loaded = load_tasks(tmp_path)
    assert [t.name for t in loaded.tasks] == ["same"]
    assert len(loaded.errors) == 1 and "already used" in loaded.errors[0].message


def test_load_tasks_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_tasks(tmp_path / "missing")


def test_filtering_by_name_and_glob(tmp_path: Path) -> None:
    for name in ("fix-git", "fix-db", "build-x", "broken-one"):
        make_task(tmp_path, name, "[agent\n" if name == "broken-one" else "")
    tasks, errors = load_tasks(tmp_path, include=["fix-*"])
    assert [t.name for t in tasks] == ["fix-db", "fix-git"] and errors == []
    tasks, _ = load_tasks(tmp_path, include=["fix-*", "build-x"], exclude=["*db"])
    assert [t.name for t in tasks] == ["build-x", "fix-git"]
    tasks, errors = load_tasks(tmp_path, include=["broken-*"])
    assert tasks == [] and [e.name for e in errors] == ["broken-one"]
    all_tasks = load_tasks(tmp_path).tasks
    assert [t.name for t in filter_tasks(all_tasks, ["build-x"])] == ["build-x"]
    assert filter_tasks(all_tasks) == all_tasks


def test_filter_matches_folder_name_too(tmp_path: Path) -> None:
    make_task(tmp_path, "folder", '[task]\nname = "org/pretty"\n')
    tasks = load_tasks(tmp_path).tasks
    assert filter_tasks(tasks, ["folder"]) == filter_tasks(tasks, ["pretty"]) == tasks


def test_copy_of_fixture_still_loads(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "tb2-style-task", tmp_path / "copy")
    assert load_task(tmp_path / "copy").name == "copy"


# ---- env templates -----------------------------------------------------------------------------


def test_resolve_env_templates() -> None:
    host = {"HOME_DIR": "/root"}
    out = resolve_env({"A": "${HOME_DIR}/x", "B": "${MISSING:-dflt}", "C": "plain"}, host)
    assert out == {"A": "/root/x", "B": "dflt", "C": "plain"}
    with pytest.raises(ConfigError, match="MISSING"):
        resolve_env({"A": "${MISSING}"}, host, where="[verifier] env")


def test_load_tasks_again_sees_every_edit_of_what_it_reads(tmp_path: Path) -> None:
    """A task folder is parsed again only when a file it reads changed (`ahe.tasks.unchanged`): every
    kind of edit between two loads must show in the second."""
    import os
    import time

    folder = make_task(tmp_path, "a", '[agent]\ntimeout_sec = 100\n')
    assert load_tasks(tmp_path).tasks[0] is not load_tasks(tmp_path).tasks[0]  # just written: not trusted yet
    old = time.time() - 10
    for p in (folder, folder / "task.toml", folder / "instruction.md", folder / "tests", folder / "tests" / "test.sh"):
        os.utime(p, (old, old))  # as if written ten seconds ago
    first = load_tasks(tmp_path).tasks[0]
    assert load_tasks(tmp_path).tasks[0] is first  # unchanged: not parsed again
    (folder / "task.toml").write_text('[agent]\ntimeout_sec = 200\n')  # same size, rewritten in place
    assert load_tasks(tmp_path).tasks[0].agent_timeout_sec == 200
    (folder / "instruction.md").write_text("Do another thing.\n")
    assert load_tasks(tmp_path).tasks[0].instruction == "Do another thing.\n"
    (folder / "environment").mkdir()
    (folder / "environment" / "Dockerfile").write_text("FROM scratch\n")
    assert load_tasks(tmp_path).tasks[0].environment.dockerfile == folder.resolve() / "environment" / "Dockerfile"
    (folder / "environment" / "Dockerfile").unlink()
    assert load_tasks(tmp_path).tasks[0].environment.dockerfile is None
    (folder / "tests" / "test.sh").unlink()
    again = load_tasks(tmp_path)
    assert not again.tasks and "tests/test.sh" in again.errors[0].message
