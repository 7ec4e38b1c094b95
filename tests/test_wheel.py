"""A wheel — what a user gets from a package index — carries everything AHE reads at run time.

The seed harness and the bundled examples are top-level folders of the repository, not
packages; setup.py copies them into ahe/_bundled/ and ahe.resources finds them there. This
builds the real wheel, unpacks it outside the checkout and runs `ahe init` and `ahe demo` from
an empty folder with only the unpacked wheel on the path (CI also installs it into a fresh
venv and does the same, see .ci/run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("wheel")  # one worker builds the one wheel (setuptools' build/ is shared)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                           capture_output=True, text=True, timeout=240, cwd=out)
    assert build.returncode == 0, build.stderr[-2000:]
    (whl,) = out.glob("ahe-*.whl")
    return whl


def test_wheel_carries_every_shipped_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(["git", "ls-files", "-z", "ahe", "debugger", "evolve_agent", "explore_agent",
                              "harness_workspace", "examples"], capture_output=True, text=True, cwd=ROOT, check=True).stdout.split("\0")
    tracked = [f for f in tracked if f]
    expected = {f if f.split("/")[0] not in ("harness_workspace", "examples") else f"ahe/_bundled/{f}" for f in tracked}
    missing = sorted(expected - names)
    assert not missing, f"{len(missing)} shipped files are not in the wheel, e.g. {missing[:5]}"
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_wheel_runs_init_and_demo_from_an_empty_folder(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}  # before the checkout's editable install on sys.path

    def ahe(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ahe.cli", *args], cwd=empty, env=env,
                              capture_output=True, text=True, timeout=240)

    init = ahe("init", "exp")
    assert init.returncode == 0, init.stderr
    config = yaml.safe_load((empty / "exp" / "config.yaml").read_text())
    assert Path(config["tasks"]).is_relative_to(site / "ahe" / "_bundled"), config["tasks"]
    assert (empty / "exp" / "seed_workspace" / "agent.yaml").is_file()

    demo = ahe("demo", "demo-run", "--quiet")
    assert demo.returncode == 0, demo.stderr[-3000:]
    scores = (empty / "demo-run" / "run" / "scores.json").read_text()
    assert '"iteration": 3' in scores

    copied = ahe("examples", "here")
    assert copied.returncode == 0, copied.stderr
    assert (empty / "here" / "examples" / "tasks" / "word-frequency-top" / "task.toml").is_file()
    assert (empty / "here" / "harness_workspace" / "agent.yaml").is_file()
