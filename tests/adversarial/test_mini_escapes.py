"""A mini-swe-agent harness attacks AHE under `ahe eval`: its own agent class asks the gateway for
the key and opens a second connection to it; its own environment class
(tests/fixtures/mini_attack/attack_env.py, a LocalEnvironment subclass) tries to read the key,
read the tasks' hidden tests, write into the run folder and the harness folder and reach the
network, from the confined worker; its commands then look for /tests in the trial's sandbox.
Each attempt must be refused and pass@1 stay honest (docs/backends.md, docs/confinement.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.adversarial.listener import TokenListener
from tests.adversarial.record import Tally
from tests.conftest import REPO, write_files
from tests.mini_support import mini_harness, needs_mini

pytestmark = [pytest.mark.bwrap, needs_mini]
ATTACK = REPO / "tests" / "fixtures" / "mini_attack" / "attack_env.py"
LAYER = "confined worker (bwrap) + model gateway, mini-swe-agent backend"


def test_mini_environment_class_attacks_are_refused(tmp_path: Path) -> None:
    secret = f"sk-SECRET-{uuid.uuid4().hex}"
    listener = TokenListener()  # counts only the attack's own connection (tests/adversarial/listener.py)
    tasks = write_files(tmp_path / "tasks", {
        f"unsolved/{name}": text for name, text in {
            "task.toml": '[task]\nname = "unsolved"\n[agent]\ntimeout_sec = 120\n',
            "instruction.md": "Write ok to /app/out.txt.\n",
            "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n"
                             "grep -q ok /app/out.txt && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
            "tests/test_outputs.py": f"# hidden {secret[:12]}\n",
            "solution/solve.sh": "#!/bin/bash\necho ok > /app/out.txt\n",
        }.items()})
    out = tmp_path / "out"
    out.mkdir()
    params = {"tasks_dir": str(tasks), "run_dir": str(out), "ahe_pid": os.getpid(), "secret": secret,
              "port": listener.port, "token": listener.token}
    harness = mini_harness(tmp_path / "harness", edit={
        "environment": {"environment_class": "attack_env.AttackEnv", "attack": params},
        "agent": {"agent_class": "attack_env.AttackAgent",  # its report goes into the instance message
                  "instance_template": "Please solve this issue: {{task}}\nAGENT_ATTACKS:{{agent_attacks | default('{}')}}"}})
    shutil.copy(ATTACK, harness / "attack_env.py")
    look = "ls -la /tests 2>&1; cat /tests/test_outputs.py 2>&1; echo probe-done"
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"name": "probes the sandbox (MOCK)", "rules": [
        {"match": {"turn": 1}, "tool_calls": [{"name": "bash", "arguments": {"command": look}}]},
        {"match": {"turn": 2}, "tool_calls": [{"name": "bash", "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}}]}],
        "default": {"reply": "done"}}))
    env = {**os.environ, "OPENAI_API_KEY": secret, "PYTHONPATH": str(REPO), "RAY_ADDRESS": ""}
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(harness), "--tasks", str(tasks),
                           "--out", str(out), "--mock-policy", str(policy), "--isolation", "bwrap", "--json"],
                          capture_output=True, text=True, env=env, timeout=300)
    connected = listener.close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout)
    traj = json.loads((out / "rollouts" / "unsolved" / "trial-1" / "trajectory.json").read_text())
    first = traj["steps"][2]["observation"]["results"][0]["content"]
    report = json.loads(json.loads(first)["output"].split("\n", 1)[0].removeprefix("ATTACKS:"))

    agent_report = json.loads(traj["steps"][1]["message"].split("AGENT_ATTACKS:", 1)[1])
    refused = [json.loads(line)["refused"] for line in
               (out / "rollouts" / "unsolved" / "trial-1" / "conversation.jsonl").read_text().splitlines()
               if "refused" in json.loads(line)]

    tally = Tally("mini-swe-agent harness code")
    assert len(report) == 5 and len(agent_report) == 2, (report, agent_report)
    for name, r in agent_report.items():
        tally(f"agent class: {name}", not r["got_through"], LAYER, note=r["detail"][:80])
    tally("each request to the gateway outside its protocol is recorded as refused",
          len(refused) == 3 and all("unknown operation" in r for r in refused), "model gateway: conversation.jsonl",
          attempts=3, note=refused[0] if refused else "")
    for name, r in report.items():
        if name != "open a network connection":
            tally(name, not r["got_through"], LAYER, note=r["detail"][:80])
    tally("open a network connection", not connected and not report["open a network connection"]["got_through"],
          LAYER + ": no network namespace", note=listener.note() or report["open a network connection"]["detail"][:80])
    tally("read the hidden tests from the sandbox during the session", secret[:12] not in first and "probe-done" in first,
          "sandbox: tests are uploaded only for the verifier")
    tally("nothing written into the run folder or the harness", not (out / "evil.txt").exists()
          and not (harness / "evil.txt").exists(), LAYER)
    tally("pass@1 stays honest (the agent solves nothing)", results["pass_at_1"] == 0.0 and results["infra_errors"] == 0,
          LAYER)
    run_files = [p for p in out.rglob("*") if p.is_file()]
    tally("no key in any file of the run folder", not any(secret.encode() in p.read_bytes() for p in run_files),
          "model gateway: keys stay on the host")
    tally.check()
