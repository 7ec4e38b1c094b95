"""`ahe tasks make swe-ci`: a task from a git repository's base and target commits.

Checks both commits out (git archive, so the repository is never touched), writes the task
folder in a staging place, counts the target's tests on base and target in the sandbox, and
keeps the task when its test gap n(c*) - n(c0) reaches `min_gap` (the paper's filter is 5).
"""

from __future__ import annotations

import asyncio
import csv
import io
import re
import shutil
import tarfile
from pathlib import Path

from pydantic import BaseModel

from ahe.errors import AheError, ConfigError
from ahe.tasks.sources.swe_ci.counting import count_task, no_tests_reason
from ahe.tasks.sources.swe_ci.docker_env import DEFAULT_BASE_IMAGE, write_env_context
from ahe.tasks.sources.swe_ci.layout import CISettings, TaskSpec, write_expected, write_task
from ahe.tasks.sources.swe_ci.runner import detect_pytest
from ahe.tasks.sources.buildfiles import add_to_tree, build_files, git_checkout, has_build
from ahe.tasks.sources.testenv import TestEnv, declared_requirements, ensure_env
from ahe.tempdirs import temp_dir

DEFAULT_MIN_GAP = 5


class MakeResult(BaseModel):
    name: str
    path: Path | None  # None when the task was not kept
    n_base: int | None = None
    n_target: int | None = None
    gap: int | None = None
    kept: bool = False
    reason: str = ""
    runner: str = ""  # which runner counted the tests, and why
    skipped: int = 0  # tests skipped or xfailed on the target (in neither count)
    test_env: str | None = None  # the test environment's folder, when the task has one
    env_seconds: float = 0.0  # time spent making (or finding) the test environment


def export_tree(repo_path: Path, sha: str, dest: Path) -> str:
    """Write the files of commit `sha` to `dest`; return the full commit id."""
    import git

    try:
        repo = git.Repo(repo_path)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise AheError(f"--repo {repo_path}: not a git repository; pass the folder of a git clone.") from None
    try:
        full = repo.commit(sha).hexsha
    except (git.BadName, ValueError):
        raise AheError(f"--repo {repo_path}: no commit {sha!r}; pass a commit id, tag or branch that exists there.") from None
    buf = io.BytesIO()
    repo.archive(buf, full, format="tar")
    buf.seek(0)
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=buf) as tar:
        tar.extractall(dest, filter="tar")
    return full


def default_name(repo_path: Path, base: str, target: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", repo_path.resolve().name).strip("-") or "repo"
    return f"{stem}-{base[:7]}-{target[:7]}"


def make_task(
    repo_path: Path, base: str, target: str, out_dir: Path, *, name: str | None = None,
    test_dirs: list[str] | None = None, test_command: str | None = None, min_gap: int = DEFAULT_MIN_GAP,
    ci: CISettings | None = None, sandbox: str = "local", isolation: str = "auto", force: bool = False,
    repo_label: str | None = None, setup: str | None = None, test_env: str = "auto", base_image: str | None = None,
    install_project: bool = True, log=lambda s: None,
) -> MakeResult:
    """Make one task folder under `out_dir`; a task below `min_gap` is reported, not written.

    `repo_label` is what task.toml records as the repository (default: its absolute path).
    `test_env`: "auto" makes the repository's test environment when it declares dependencies,
    uses pytest or `setup` is given; "none" runs the tests with the sandbox's own python3.
    `install_project`: add what installing the project would add to each tree (its build's
    version file, its metadata; see buildfiles.py), as tox does before it runs the tests.
    """
    with temp_dir("swe-ci-make") as tmp:
        tmp_path = Path(tmp)
        base_sha = export_tree(repo_path, base, tmp_path / "base")
        target_sha = export_tree(repo_path, target, tmp_path / "target")
        spec = TaskSpec(name=name or default_name(repo_path, base_sha, target_sha), repo=repo_label or str(repo_path.resolve()),
                        base_sha=base_sha, target_sha=target_sha, test_dirs=test_dirs or ["tests"],
                        test_command=test_command, ci=ci)
        final = out_dir / spec.name
        if final.exists() and not force:
            raise AheError(f"{final}: already exists; remove it or pass --force to replace it.")
        added, build_error = ([], None)
        if install_project:
            added, build_error = _add_build_files(repo_path, tmp_path, {"base": base_sha, "target": target_sha}, log)
            if added:
                spec.extra_metadata["build_added"] = added
        source = None
        if setup and test_env != "none":  # the setup command runs in a git checkout (VCS versions work there)
            source = tmp_path / "setup-checkout"
            git_checkout(repo_path, target_sha)(source)
        env = None if test_env == "none" else environment_for(tmp_path / "target", spec.test_dirs, setup, log,
                                                              source_dir=source)
        if sandbox == "docker":  # a docker task: its Dockerfile is generated (with the environment, if any)
            spec.docker_base_image = base_image or DEFAULT_BASE_IMAGE
        if env is not None:
            _record_env(spec, env, sandbox)
        try:
            staged = write_task(spec, tmp_path / "base", tmp_path / "target", tmp_path / "task" / spec.name)
        except FileNotFoundError as exc:
            raise AheError(f"--repo {repo_path}: {exc}") from None
        if spec.docker_env is not None:
            write_env_context(staged / "environment", spec.docker_env, spec.docker_base_image)
        expected = asyncio.run(count_task(staged, sandbox, isolation, ci.gamma if ci else 1.0))
        result = MakeResult(name=spec.name, path=None, n_base=expected["n_base"],
                            n_target=expected["n_target"], gap=expected["gap"], runner=expected.get("runner_note", ""),
                            skipped=expected.get("skipped_target", 0),
                            test_env=str(env.path) if env else None, env_seconds=env.seconds if env else 0.0)
        result = keep_if_gap(result, staged, expected, final, min_gap, spec.test_dirs)
        if build_error and not result.kept:
            result.reason += f" (building the project failed, see above: {build_error.splitlines()[0]})"
        return result


def _add_build_files(repo_path: Path, tmp: Path, shas: dict[str, str], log) -> tuple[list[str], str | None]:
    """Write into each exported tree what its build and install add (the target's paths, a
    build's error). The build runs in a git checkout of the commit, once per commit (cached)."""
    added: list[str] = []
    error = None
    for side, sha in shas.items():
        tree = tmp / side
        if not has_build(tree):
            continue
        built = build_files(tree, key=f"commit:{sha}", prepare=git_checkout(repo_path, sha),
                            label=f"the {side} commit {sha[:12]}", log=log)
        if built.error:
            log(f"{built.error}\n(the {side} tests run from its source tree alone)")
            error = error or built.error
            continue
        written = add_to_tree(tree, built)
        log(f"the build of the {side} commit adds {', '.join(written) or 'nothing'}"
            + (" (cached)" if built.reused else f" ({built.seconds:.1f} s)"))
        if side == "target":
            added = written
    return added, error


def environment_for(tree: Path, test_dirs: list[str], setup: str | None, log=lambda s: None,
                    source_dir: Path | None = None) -> TestEnv | None:
    """The test environment a tree's tests need (None when the sandbox's python3 is enough).
    The setup command runs in `source_dir` (default: a copy of the tree)."""
    uses_pytest = detect_pytest(tree, test_dirs) is not None
    reqs = declared_requirements(tree, pytest=uses_pytest)
    if not reqs and not setup:
        return None
    return ensure_env(reqs, setup=setup, source_dir=source_dir or tree, log=log)


def _record_env(spec: TaskSpec, env: TestEnv, sandbox: str) -> None:
    """Put the environment into the task: a mounted folder (local) or a Dockerfile (docker)."""
    spec.extra_metadata.update({"test_env_python": env.python_version, "test_env_requirements": env.requirements,
                                "test_env_frozen": env.frozen})
    if env.setup:
        spec.extra_metadata["test_env_setup"] = env.setup
    if sandbox == "docker":
        spec.docker_env = env
    else:
        spec.test_env = env.path


def keep_if_gap(result: MakeResult, staged: Path, expected: dict, final: Path, min_gap: int,
                test_dirs: list[str] | None = None) -> MakeResult:
    """Move a staged task into place with its expected counts when its test gap reaches `min_gap`."""
    if expected["gap"] < min_gap:
        result.reason = no_tests_reason(expected, test_dirs or ["tests"]) or f"test gap {expected['gap']} < {min_gap}"
        return result
    expected = {k: v for k, v in expected.items() if k != "first_error"}  # holds temporary paths
    write_expected(staged, expected)
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        shutil.rmtree(final)
    shutil.move(str(staged), final)
    result.path, result.kept = final, True
    return result


def read_batch(csv_path: Path) -> list[dict[str, str]]:
    """Rows of repo, base, target (SWE-CI's current_sha / target_sha are accepted too)."""
    try:
        rows = list(csv.DictReader(csv_path.read_text(encoding="utf-8").splitlines()))
    except OSError as exc:
        raise ConfigError(f"{csv_path}: cannot read it ({exc.strerror}).") from None
    out = []
    for i, row in enumerate(rows, start=2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
        base = row.get("base") or row.get("current_sha") or row.get("base_sha")
        target = row.get("target") or row.get("target_sha")
        if not row.get("repo") or not base or not target:
            raise ConfigError(f"{csv_path}: line {i} needs the columns repo, base and target; "
                              "write a header line `repo,base,target`.")
        out.append({"repo": row["repo"], "base": base, "target": target, "name": row.get("name") or row.get("task_id") or ""})
    return out


def validate_batch(rows: list[dict[str, str]], csv_path: Path, out_dir: Path, force: bool) -> list[dict[str, str]]:
    """Check every row before any task is made: the repository, both commits, a unique name
    and a free folder. All problems are reported together in one error."""
    import git

    problems: list[str] = []
    names: dict[str, int] = {}
    checked = []
    for line, row in enumerate(rows, start=2):
        path = (csv_path.parent / row["repo"]).resolve()
        try:
            repo = git.Repo(path)
            shas = [repo.commit(row[k]).hexsha for k in ("base", "target")]
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            problems.append(f"line {line}: {row['repo']} is not a git repository")
            continue
        except (git.BadName, ValueError):
            problems.append(f"line {line}: {row['repo']} has no commit {row['base']!r} or {row['target']!r}")
            continue
        name = row["name"] or default_name(path, *shas)
        if name in names:
            problems.append(f"line {line}: the task name {name} is also line {names[name]}'s")
        names[name] = line
        if (out_dir / name).exists() and not force:
            problems.append(f"line {line}: {out_dir / name} already exists (pass --force to replace it)")
        checked.append({**row, "repo_path": str(path), "name": name})
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ConfigError(f"{csv_path}: no task was made, {len(problems)} row(s) are wrong: "
                          f"{'; '.join(problems[:5])}{more}.")
    return checked
