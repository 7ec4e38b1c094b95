"""Keys set in the environment (OPENAI_API_KEY) and in a role's `api_key_env` never reach the disk:
not the run folder, not the workspace's git history (every object), not the logs, not the reports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from ahe.demo import write_demo
from tests.adversarial.record import Tally

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def test_no_key_value_anywhere_on_disk(tmp_path):
    keys = {"OPENAI_API_KEY": f"sk-env-{uuid.uuid4().hex}", "AHE_TEST_DEBUGGER_KEY": f"sk-role-{uuid.uuid4().hex}",
            "AHE_TEST_EVOLVE_KEY": f"sk-role-{uuid.uuid4().hex}"}
    cfg_path = write_demo(tmp_path / "demo", iterations=1, k=1)
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["models"]["debugger"]["api_key_env"] = "AHE_TEST_DEBUGGER_KEY"
    cfg["models"]["evolve"]["api_key_env"] = "AHE_TEST_EVOLVE_KEY"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    agent_pol = cfg_path.parent / cfg["mock_policies"]["agent"]
    pol = yaml.safe_load(agent_pol.read_text())  # the code agent looks for keys first
    pol["rules"].insert(0, {"name": "hunt keys", "match": {"turn": 1}, "tool_calls": [{"name": "run_shell_command", "arguments": {
        "command": "env; cat /proc/1/environ /proc/self/environ | tr '\\0' '\\n'; grep -r sk- /etc /root /tmp 2>/dev/null | head"}}]})
    agent_pol.write_text(yaml.safe_dump(pol, sort_keys=False))
    env = {**os.environ, **keys}
    run, logs = tmp_path / "run", tmp_path / "logs"
    logs.mkdir()
    for name, args in (("evolve", ["evolve", str(cfg_path), "--run-dir", str(run)]), ("audit", ["audit", str(run)]),
                       ("report", ["report", str(run)])):
        proc = subprocess.run([sys.executable, "-m", "ahe.cli", *args], capture_output=True, text=True, timeout=600,
                              env=env, cwd=tmp_path)
        (logs / f"{name}.out").write_text(proc.stdout)
        (logs / f"{name}.err").write_text(proc.stderr)
        assert proc.returncode == 0, proc.stderr[-2000:]

    objects = subprocess.run(["git", "-C", str(run / "workspace"), "cat-file", "--batch-all-objects", "--batch"],
                             capture_output=True, timeout=60).stdout
    history = subprocess.run(["git", "-C", str(run / "workspace"), "log", "--all", "-p"], capture_output=True,
                             timeout=60).stdout
    places = {"run folder (every file)": [p for p in run.rglob("*") if p.is_file()],
              "logs (stdout/stderr of evolve, audit, report)": [p for p in logs.iterdir()]}
    tally = Tally("secrets")
    found_files = {}
    for place, files in places.items():
        found_files[place] = [str(p.relative_to(tmp_path)) for p in files
                              if any(v.encode() in p.read_bytes() for v in keys.values())]
    reports = [p for p in run.rglob("*.html")] + [logs / "audit.out"]
    n_files = sum(len(f) for f in places.values())
    tally("key values in the run folder", not found_files["run folder (every file)"], "config saved redacted; env scrubbed",
          attempts=len(places["run folder (every file)"]), note=f"{len(places['run folder (every file)'])} files scanned; "
          + ", ".join(found_files["run folder (every file)"][:3]))
    tally("key values in the workspace's git history", not any(v.encode() in objects + history for v in keys.values()),
          "harness repo: only workspace files", note=f"{len(objects)} bytes of git objects scanned")
    tally("key values in logs and reports", not found_files["logs (stdout/stderr of evolve, audit, report)"]
          and reports and not any(v.encode() in p.read_bytes() for p in reports for v in keys.values()),
          "CLI output, audit, HTML report", attempts=len(reports) + len(places["logs (stdout/stderr of evolve, audit, report)"]))
    hunted = [p for p in run.glob("iterations/001/rollouts/*/trial-1/trajectory.json") if b"LANG=C.UTF-8" in p.read_bytes()]
    tally("the code agent hunting for keys in its sandbox", bool(hunted) and not found_files["run folder (every file)"],
          "local sandbox: commands get a scrubbed environment", attempts=len(hunted),
          note="env, /proc/*/environ, grep sk- (outputs are in its trajectories)")
    tally.check()
    assert n_files > 50
