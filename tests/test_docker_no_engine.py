"""`--sandbox docker` with no reachable engine is one sentence and exit 2 for every command that
takes it, before any run folder is made — never a silent run on the local sandbox, never an error
per trial. (`ahe eval`, `ahe tasks check` and the SWE-CI makers: tests/test_swe_ci_real_repos.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def ahe(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ahe.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **env})


def test_evolve_and_transfer_refuse_docker_without_an_engine(tmp_path):
    env = {"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    assert ahe("init", "exp", cwd=tmp_path, env=env).returncode == 0
    config = tmp_path / "exp" / "config.yaml"
    data = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**data, "sandbox": "docker"}, sort_keys=False))

    evolve = ahe("evolve", str(config), "--run-dir", str(tmp_path / "run"), "--quiet", cwd=tmp_path, env=env)
    assert evolve.returncode == 2, evolve.stderr
    assert "--sandbox docker: The Docker engine at" in evolve.stderr and "Traceback" not in evolve.stderr
    assert not (tmp_path / "run").exists()

    transfer = ahe("transfer", "--harness", "seed", "--models", "mock", "--tasks", str(ROOT / "examples" / "tasks"),
                   "--sandbox", "docker", "--out", str(tmp_path / "tr"), cwd=tmp_path, env=env)
    assert transfer.returncode == 2, transfer.stderr
    assert "--sandbox docker: The Docker engine at" in transfer.stderr and "Traceback" not in transfer.stderr
    assert not (tmp_path / "tr").exists()
