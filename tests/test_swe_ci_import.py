"""`ahe tasks import swe-ci` on a mini dataset in the published SWE-CI layout, on a real engine.

The dataset is made here, offline: metadata/default.csv, data/<id>/code.zip (a real git
repository: the `units` example project) and data/<id>/image.tar.gz (`docker save` of an image
built FROM the offline base image with this machine's Python added). The imported task is
checked (oracle 1, do-nothing 0) and run as a CI trial with the mock Programmer in Docker.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest
from docker_support import base_image, docker_engine  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "swe-ci"
PYTHON = Path("/usr/bin/python3.11")
SKIP_LIB = {"test", "idlelib", "tkinter", "ensurepip", "lib2to3", "pydoc_data", "site-packages", "dist-packages",
            "__pycache__", "turtledemo", "unittest/test", "distutils", "config-3.11-x86_64-linux-gnu"}

pytestmark = [pytest.mark.docker,
              pytest.mark.skipif(not PYTHON.is_file(), reason="needs the Debian python3.11 to put in the test image")]


def _python_rootfs(dest: Path) -> None:
    """/usr/bin/python3 with the libraries ldd names and a trimmed standard library."""
    from ahe.sandbox.docker_images import _shared_libraries

    for f in [str(PYTHON), *_shared_libraries(str(PYTHON))]:
        target = dest / f.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(f).resolve(), target)
    (dest / "usr/bin/python3").symlink_to("python3.11")
    (dest / "usr/bin/python").symlink_to("python3.11")
    shutil.copytree("/usr/lib/python3.11", dest / "usr/lib/python3.11", symlinks=True,
                    ignore=lambda d, names: {n for n in names if n in SKIP_LIB or n.endswith(".pyc")})


@pytest.fixture
def mini_dataset(tmp_path, docker_engine, base_image):  # noqa: F811 - fixtures
    sys.path.insert(0, str(EXAMPLES))
    from make_examples import build_repo

    root = tmp_path / "swe-ci"
    repo = tmp_path / "repo" / "units"
    shas = build_repo("units", repo)
    data = root / "data" / "units-mini"
    data.mkdir(parents=True)
    with zipfile.ZipFile(data / "code.zip", "w") as zf:
        for p in sorted(repo.rglob("*")):
            zf.write(p, p.relative_to(repo))
    (root / "metadata").mkdir()
    (root / "metadata" / "default.csv").write_text(
        f"task_id,current_sha,target_sha,test_gap,repo_name\nunits-mini,{shas[1]},{shas[-1]},5,example/units\n")

    ctx = tmp_path / "image"
    _python_rootfs(ctx / "rootfs")
    (ctx / "Dockerfile").write_text(f"FROM {base_image}\nCOPY rootfs/ /\n")
    tag = f"ahe-test-swe-ci-mini-{uuid.uuid4().hex[:8]}:1"
    docker_engine.images.build(path=str(ctx), tag=tag, rm=True)
    with gzip.open(data / "image.tar.gz", "wb", compresslevel=1) as out:
        for chunk in docker_engine.images.get(tag).save(named=True):
            out.write(chunk)
    docker_engine.images.remove(tag)  # the importer must bring it back with `docker load`
    yield root, tag
    for image in docker_engine.images.list():
        if tag in image.tags or any(t.startswith("ahe-task-units-mini") for t in image.tags):
            docker_engine.images.remove(image.id, force=True)


def test_import_published_layout_and_run_it_on_docker(mini_dataset, tmp_path, docker_engine):  # noqa: F811
    import asyncio

    from ahe.tasks import load_task
    from ahe.tasks.check import check_tasks
    from ahe.tasks.sandboxes import docker_sandbox_factory
    from ahe.tasks.sources.swe_ci.layout import CISettings
    from ahe.tasks.sources.swe_ci.published import import_dataset

    root, tag = mini_dataset
    out = tmp_path / "tasks"
    [res] = import_dataset(root, out, ci=CISettings(rounds=3, gamma=2.0), client=docker_engine)
    assert res.kept and (res.n_base, res.n_target, res.gap) == (2, 7, 5)
    task = load_task(out / "units-mini")
    assert task.runs_on == "docker" and task.metadata["published_test_gap"] == 5
    assert (out / "units-mini" / "environment" / "Dockerfile").read_text().startswith(f"FROM {tag}")
    assert docker_engine.images.get(tag)  # loaded again from image.tar.gz

    report = asyncio.run(check_tasks([task], {"docker": docker_sandbox_factory(client=docker_engine)},
                                     work_dir=tmp_path / "check"))
    [row] = report.tasks
    assert row.oracle.status == "ok" and row.oracle.reward == 1.0
    assert row.nop.status == "ok" and row.nop.reward == 0.0

    # the CI loop in Docker: the mock Programmer's three rounds give a = 0.4, 0.4, 0.8
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(ROOT / "harness_workspace"),
                           "--tasks", str(out), "--sandbox", "docker", "--mock-policy", str(EXAMPLES / "mock-policy.yaml"),
                           "--out", str(tmp_path / "run"), "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    trial = tmp_path / "run" / "rollouts" / "units-mini" / "trial-1"
    rounds = [json.loads(line)["a"] for line in (trial / "verifier" / "rounds.jsonl").read_text().splitlines()]
    assert rounds == pytest.approx([0.4, 0.4, 0.8])
    rewards = json.loads((trial / "result.json").read_text())["rewards"]
    assert rewards["evoscore"] == pytest.approx(8.8 / 14) and rewards["zero_regression"] == 0.0
