"""`ahe tasks import swe-ci`: task folders from the published SWE-CI benchmark, unchanged.

The benchmark's layout (as its own initialize/run steps read it)::

    <root>/metadata/<split>.csv       task_id, current_sha, target_sha, test_gap (others ignored)
    <root>/data/<task_id>/code.zip    the repository, with its git history
    <root>/data/<task_id>/image.tar.gz  a Docker image (`docker save`) with the project's
                                      interpreter and dependencies; the code is not in it

Per task: `docker load` the image, check out current_sha and target_sha from code.zip, and
write a docker task whose environment/Dockerfile is `FROM` the loaded image with the base code
(its target test folders in place) at /app. The tests are counted on base and target in that
image, as for `ahe tasks make swe-ci`; the CI loop defaults to SWE-CI's 20 rounds.
"""

from __future__ import annotations

import asyncio
import csv
import zipfile
from pathlib import Path

from ahe.errors import AheError, ConfigError
from ahe.tasks.sources.swe_ci.counting import count_task
from ahe.tasks.sources.swe_ci.layout import CISettings, TaskSpec, write_task
from ahe.tasks.sources.swe_ci.maker import MakeResult, export_tree, keep_if_gap
from ahe.tempdirs import temp_dir

REQUIRED_COLUMNS = ("task_id", "current_sha", "target_sha")
DEFAULT_ROUNDS = 20


def read_metadata(csv_path: Path) -> list[dict[str, str]]:
    """The rows of a metadata CSV; a missing column is one clear error."""
    if not csv_path.is_file():
        raise ConfigError(f"{csv_path}: metadata CSV not found; pass the dataset root that holds metadata/<split>.csv.")
    rows = list(csv.DictReader(csv_path.read_text(encoding="utf-8").splitlines()))
    header = set(rows[0]) if rows else set()
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise ConfigError(f"{csv_path}: the column(s) {', '.join(missing)} are missing; SWE-CI metadata has "
                          "task_id, current_sha, target_sha and test_gap.")
    return [{k: (v or "").strip() for k, v in row.items() if k} for row in rows]


def load_image(tarball: Path, task_id: str, client=None) -> str:
    """`docker load` the task's image; return a tag that names it (added when the file has none)."""
    import docker

    client = client or docker.from_env()
    with tarball.open("rb") as fh:
        images = client.images.load(fh)
    if not images:
        raise AheError(f"{tarball}: docker load found no image in it.")
    image = images[0]
    if image.tags:
        return image.tags[0]
    tag = f"ahe-swe-ci/{task_id.lower()}:base"
    image.tag(tag)
    return tag


def _repo_root(extracted: Path, zip_path: Path) -> Path:
    """The folder with .git: the zip's top level, or its only folder."""
    if (extracted / ".git").exists():
        return extracted
    subs = [p for p in extracted.iterdir() if p.is_dir()]
    if len(subs) == 1 and (subs[0] / ".git").exists():
        return subs[0]
    raise AheError(f"{zip_path}: holds no git repository (no .git at its top level or in its only folder).")


def import_task(row: dict[str, str], data_dir: Path, out_dir: Path, *, ci: CISettings, test_dirs: list[str],
                min_gap: int, force: bool = False, client=None) -> MakeResult:
    """One row of the metadata into one docker task folder under `out_dir`."""
    task_id = row["task_id"]
    folder = data_dir / task_id
    for name in ("code.zip", "image.tar.gz"):
        if not (folder / name).is_file():
            raise AheError(f"{folder / name}: missing; download the dataset (SWE-CI's download step) first.")
    final = out_dir / task_id
    if final.exists() and not force:
        raise AheError(f"{final}: already exists; remove it or pass --force to replace it.")
    image = load_image(folder / "image.tar.gz", task_id, client)
    with temp_dir("swe-ci-import") as tmp:
        t = Path(tmp)
        with zipfile.ZipFile(folder / "code.zip") as zf:
            zf.extractall(t / "zip")
        repo = _repo_root(t / "zip", folder / "code.zip")
        base = export_tree(repo, row["current_sha"], t / "base")
        target = export_tree(repo, row["target_sha"], t / "target")
        spec = TaskSpec(name=task_id, repo=row.get("repo_name") or task_id, base_sha=base, target_sha=target,
                        test_dirs=test_dirs, ci=ci, docker_base_image=image,
                        extra_metadata={"swe_ci_task_id": task_id, "published_test_gap": int(row.get("test_gap") or -1),
                                        "docker_image_file": str((folder / "image.tar.gz").resolve())})
        staged = write_task(spec, t / "base", t / "target", t / "task" / task_id)
        expected = asyncio.run(count_task(staged, "docker", gamma=ci.gamma, client=client))
        result = MakeResult(name=task_id, path=None, n_base=expected["n_base"], n_target=expected["n_target"],
                            gap=expected["gap"])
        published = row.get("test_gap")
        if published and published.isdigit() and int(published) != expected["gap"]:
            result.reason = f"test gap {expected['gap']} here, {published} in the metadata"
        return keep_if_gap(result, staged, expected, final, min_gap)


def _engine():
    """The Docker engine the published images need: one sentence when there is none."""
    from ahe.sandbox.base import SandboxError
    from ahe.sandbox.docker_engine import docker_client

    try:
        return docker_client()
    except SandboxError as exc:
        raise AheError(f"importing the published SWE-CI layout needs a Docker engine (its tasks run on their "
                       f"images): {exc}") from None


def import_dataset(root: Path, out_dir: Path, *, split: str = "default", only: list[str] | None = None,
                   ci: CISettings | None = None, test_dirs: list[str] | None = None, min_gap: int = 1,
                   force: bool = False, client=None) -> list[MakeResult]:
    """Every task of `<root>/metadata/<split>.csv` (or those in `only`) into `out_dir`."""
    rows = read_metadata(root / "metadata" / f"{split}.csv")
    client = client or _engine()
    if only:
        unknown = sorted(set(only) - {r["task_id"] for r in rows})
        if unknown:
            raise AheError(f"--task {', '.join(unknown)}: not in {root / 'metadata' / f'{split}.csv'}.")
        rows = [r for r in rows if r["task_id"] in only]
    ci = ci or CISettings(rounds=DEFAULT_ROUNDS, gamma=1.0)
    return [import_task(r, root / "data", out_dir, ci=ci, test_dirs=test_dirs or ["tests"], min_gap=min_gap,
                        force=force, client=client) for r in rows]
