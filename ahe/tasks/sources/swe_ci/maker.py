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
from ahe.tasks.sources.swe_ci.counting import count_task
from ahe.tasks.sources.swe_ci.layout import CISettings, TaskSpec, write_expected, write_task
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
    repo_label: str | None = None,
) -> MakeResult:
    """Make one task folder under `out_dir`; a task below `min_gap` is reported, not written.

    `repo_label` is what task.toml records as the repository (default: its absolute path).
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
        try:
            staged = write_task(spec, tmp_path / "base", tmp_path / "target", tmp_path / "task" / spec.name)
        except FileNotFoundError as exc:
            raise AheError(f"--repo {repo_path}: {exc}") from None
        expected = asyncio.run(count_task(staged, sandbox, isolation, ci.gamma if ci else 1.0))
        result = MakeResult(name=spec.name, path=None, n_base=expected["n_base"],
                            n_target=expected["n_target"], gap=expected["gap"])
        return keep_if_gap(result, staged, expected, final, min_gap)


def keep_if_gap(result: MakeResult, staged: Path, expected: dict, final: Path, min_gap: int) -> MakeResult:
    """Move a staged task into place with its expected counts when its test gap reaches `min_gap`."""
    if expected["gap"] < min_gap:
        result.reason = f"test gap {expected['gap']} < {min_gap}"
        return result
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
