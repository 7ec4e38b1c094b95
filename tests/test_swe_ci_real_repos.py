"""`ahe tasks make swe-ci` + `ahe tasks check` on real libraries, as a new user runs them.

The repositories are built from the libraries' released sdists (tests/fixtures/real_repos):
cachetools 5.0.0 → 5.2.0 (pytest, detected from tox.ini, with a real test gap), six 1.15.0 →
1.16.0 (pytest, a root-level test file, 16 skipped tests, no gap) and isodate 0.6.0 → 0.6.1
(unittest, a runtime dependency, six, that the sandbox's python3 lacks). Test environments
are made once in the user's cache (AHE_TEST_ENV_DIR) from pip's configured index; without
one reachable these tests skip with the reason.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docker_support import base_image, docker_engine  # noqa: E402,F401 - fixtures
from real_repos import sdist_repo  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def ahe(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "ahe.cli", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


def make(*args: str) -> list[dict]:
    proc = ahe("tasks", "make", "swe-ci", "--json", *args)
    if "installing the test requirements" in proc.stderr and "failed" in proc.stderr:
        pytest.skip(f"pip cannot make the test environment here: {proc.stderr[-300:]}")
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def repos(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("real")
    return {"cachetools": sdist_repo(tmp, "cachetools", ["5.0.0", "5.2.0"]),
            "six": sdist_repo(tmp, "six", ["1.15.0", "1.16.0"]),
            "isodate": sdist_repo(tmp, "isodate", ["0.6.0", "0.6.1"]),
            "iniconfig": sdist_repo(tmp, "iniconfig", ["1.1.1"])}


def test_a_pytest_library_with_a_real_gap_yields_a_task_whose_oracle_scores_1(repos, tmp_path):
    out = tmp_path / "tasks"
    [row] = make("--repo", str(repos["cachetools"]), "--base", "v5.0.0", "--target", "v5.2.0", "--out", str(out))
    assert row["kept"] and row["gap"] == 14 and (row["n_base"], row["n_target"]) == (196, 210)
    assert row["runner"] == "pytest, because tox.ini runs pytest"
    toml = tomllib.loads((Path(row["path"]) / "task.toml").read_text())
    assert toml["environment"]["test_env"] == row["test_env"]
    assert toml["metadata"]["test_env_requirements"] == ["pytest", "pytest-cov"]  # tox.ini's deps
    assert any(p.startswith("pytest==") for p in toml["metadata"]["test_env_frozen"])  # exact versions
    check = ahe("tasks", "check", str(out), "--json")
    assert check.returncode == 0, check.stdout + check.stderr
    [result] = json.loads(check.stdout)["tasks"]
    assert result["oracle"]["reward"] == 1.0 and result["nop"]["reward"] == 0.0

    # a second task of the same repository finds its environment made: no set-up time to speak of
    [again] = make("--repo", str(repos["cachetools"]), "--base", "v5.0.0", "--target", "v5.2.0",
                   "--out", str(tmp_path / "again"), "--name", "second")
    assert again["test_env"] == row["test_env"] and again["env_seconds"] < 1.0


def test_skipped_tests_count_neither_way(repos, tmp_path):
    [row] = make("--repo", str(repos["six"]), "--base", "v1.15.0", "--target", "v1.16.0",
                 "--tests-dir", "test_six.py", "--out", str(tmp_path / "tasks"))
    assert row["runner"] == "pytest, because setup.cfg has a pytest section"
    assert row["skipped"] == 16 and row["n_target"] == 184  # the skipped tests are not in T
    assert not row["kept"] and row["reason"] == "test gap 0 < 5"  # a real gap of 0, said as such


def test_a_unittest_library_gets_its_runtime_dependency(repos, tmp_path):
    [row] = make("--repo", str(repos["isodate"]), "--base", "v0.6.0", "--target", "v0.6.1",
                 "--tests-dir", "src/isodate/tests", "--out", str(tmp_path / "tasks"))
    assert row["runner"] == "unittest discovery (no sign of pytest in the project)"
    assert row["n_target"] > 0 and row["test_env"]


def test_no_test_passing_on_either_side_is_one_sentence_with_the_likely_cause(repos, tmp_path):
    # iniconfig's tests need the test-only dependency py, which the sandbox's python3 lacks
    [row] = make("--repo", str(repos["iniconfig"]), "--base", "v1.1.1", "--target", "v1.1.1",
                 "--tests-dir", "testing", "--test-env", "none", "--out", str(tmp_path / "tasks"))
    assert not row["kept"] and "gap" not in row["reason"]
    assert row["reason"].startswith("no test passed on the base or the target (unittest discovery, although "
                                    "the project uses pytest (tox.ini has a pytest section)")
    assert "No module named 'py'" in row["reason"] and "missing dependency" in row["reason"]
    proc = ahe("tasks", "make", "swe-ci", "--repo", str(repos["isodate"]), "--base", "v0.6.0", "--target", "v0.6.1",
               "--tests-dir", "docs", "--out", str(tmp_path / "tasks"))
    assert proc.returncode == 2 and "has no test folder docs; name the test folders with --tests-dir" in proc.stderr


def test_batch_mode_checks_every_row_first_and_refuses_conflicting_flags(repos, tmp_path):
    out = tmp_path / "tasks"
    csv = tmp_path / "pairs.csv"
    csv.write_text(f"repo,base,target,name\n{repos['six']},v1.15.0,v1.16.0,a\n{repos['six']},v9,v1.16.0,b\n"
                   f"{tmp_path},v1,v2,c\n{repos['six']},v1.15.0,v1.16.0,a\n")
    proc = ahe("tasks", "make", "swe-ci", "--csv", str(csv), "--out", str(out))
    assert proc.returncode == 2 and not out.exists()
    text = " ".join(proc.stderr.split())
    assert "no task was made, 3 row(s) are wrong" in text
    assert "line 3:" in text and "line 4:" in text and "line 5:" in text and "Traceback" not in proc.stderr
    proc = ahe("tasks", "make", "swe-ci", "--csv", str(csv), "--repo", str(repos["six"]), "--out", str(out))
    assert proc.returncode == 2 and "drop --repo" in proc.stderr
    csv.write_text(f"repo,base,target,name\n{repos['six']},v1.15.0,v1.16.0,a\n{repos['isodate']},v0.6.0,v0.6.1,b\n")
    proc = ahe("tasks", "make", "swe-ci", "--csv", str(csv), "--out", str(out), "--min-gap", "1",
               "--tests-dir", "test_six.py")
    assert proc.returncode == 1  # no gap in either pair: every row reported, none kept
    assert "1/2 a: skipped: test gap 0 < 1" in proc.stderr
    assert "2/2 b: skipped: --repo" in " ".join(proc.stderr.split())  # isodate has no test_six.py


def test_docker_without_an_engine_is_one_sentence_and_exit_2(repos, tmp_path):
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    proc = ahe("tasks", "make", "swe-ci", "--repo", str(repos["six"]), "--base", "v1.15.0", "--target", "v1.16.0",
               "--out", str(tmp_path / "t"), "--sandbox", "docker", env=env)
    assert proc.returncode == 2 and "--sandbox docker: The Docker engine at" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "t").exists()
    (tmp_path / "ds" / "metadata").mkdir(parents=True)
    (tmp_path / "ds" / "metadata" / "default.csv").write_text("task_id,current_sha,target_sha,test_gap\nx,a,b,1\n")
    proc = ahe("tasks", "import", "swe-ci", str(tmp_path / "ds"), "--out", str(tmp_path / "t"), env=env)
    assert proc.returncode == 2 and "needs a Docker engine" in proc.stderr and "Traceback" not in proc.stderr
    examples = Path(__file__).resolve().parents[1] / "examples" / "swe-ci"
    for cmd in (["tasks", "check", str(examples)],
                ["eval", "--workspace", str(examples.parents[1] / "harness_workspace"), "--tasks", str(examples), "--out", str(tmp_path / "run"),
                 "--mock-policy", str(examples / "mock-policy.yaml")]):
        proc = ahe(*cmd, "--sandbox", "docker", env=env)
        assert proc.returncode == 2 and "--sandbox docker: The Docker engine at" in proc.stderr, cmd


@pytest.mark.docker
def test_docker_tasks_carry_a_generated_environment_dockerfile(repos, tmp_path, docker_engine, base_image):  # noqa: F811
    """--sandbox docker: the environment is a Dockerfile in the task (wheels + install.py),
    built by Docker, with the same layers for every task of the repository."""
    from test_swe_ci_import import _python_rootfs

    ctx = tmp_path / "image"
    _python_rootfs(ctx / "rootfs")
    (ctx / "Dockerfile").write_text(f"FROM {base_image}\nCOPY rootfs/ /\n")
    tag = f"ahe-test-real-python-{uuid.uuid4().hex[:8]}:1"
    docker_engine.images.build(path=str(ctx), tag=tag, rm=True)
    out = tmp_path / "tasks"
    try:
        [row] = make("--repo", str(repos["cachetools"]), "--base", "v5.0.0", "--target", "v5.2.0", "--out", str(out),
                     "--sandbox", "docker", "--base-image", tag)
        assert row["kept"] and row["gap"] == 14
        env = Path(row["path"]) / "environment"
        assert (env / "Dockerfile").read_text().startswith(f"FROM {tag}\n")
        assert any(p.name.startswith("pytest-") for p in (env / "ahe-env" / "wheels").iterdir())
        assert "pytest==" in (env / "ahe-env" / "requirements.txt").read_text()
        check = ahe("tasks", "check", str(out), "--sandbox", "docker", "--json")
        [result] = json.loads(check.stdout)["tasks"]
        assert result["oracle"]["reward"] == 1.0 and result["nop"]["reward"] == 0.0, check.stdout[-1500:]
    finally:
        for image in docker_engine.images.list():
            if tag in image.tags or any(t.startswith("ahe-task-cachetools-repo") for t in image.tags):
                docker_engine.images.remove(image.id, force=True)
