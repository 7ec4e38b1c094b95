"""A hostile command-line agent (and a hook script it runs) attacks AHE under `ahe eval` through the
`command` backend: tests/fixtures/command_agent/attack. The CLI runs inside the trial's sandbox
and may reach the model gateway's OpenAI face and nothing else (docs/backends.md): each attempt
must be refused, the task and run folders untouched, the key nowhere in the run folder, and
everything it asked the gateway outside chat completions recorded as refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.adversarial.listener import TokenListener
from tests.adversarial.record import Tally
from tests.adversarial.probes import alive_with as _alive_with
from tests.adversarial.probes import tree_hash as _tree_hash
from tests.adversarial.probes import unsolved_tasks
from tests.conftest import REPO
from tests.docker_support import docker_engine  # noqa: F401  (fixture)

pytestmark = pytest.mark.bwrap
ATTACK = REPO / "tests" / "fixtures" / "command_agent" / "attack"
LAYER = "command backend: the CLI in the trial's sandbox (no network) + the gateway's OpenAI face"


def test_a_hostile_cli_agent_reaches_the_gateway_and_nothing_else(tmp_path: Path) -> None:
    _attack(tmp_path, "local", [], {}, "/tmp/.ahe-channel/gateway.sock")


@pytest.mark.docker
def test_a_hostile_cli_agent_in_a_docker_sandbox_reaches_the_gateway_and_nothing_else(tmp_path: Path, docker_engine) -> None:
    from tests.command_support import build_python_image

    image = build_python_image(docker_engine)
    _attack(tmp_path, "docker", ["--sandbox", "docker"], {"environment/Dockerfile": f"FROM {image}\nWORKDIR /app\n"},
            "/run/ahe-channel/gateway.sock")


def _attack(tmp_path: Path, where: str, extra: list[str], task_files: dict[str, str], socket_path: str) -> None:
    secret = f"sk-SECRET-{uuid.uuid4().hex}"
    marker = f"ahe-cli-left-behind-{uuid.uuid4().hex[:8]}"
    listener = TokenListener()  # counts only the attack's own connection (tests/adversarial/listener.py)
    victim = subprocess.Popen(["sleep", "300"])
    tasks = unsolved_tasks(tmp_path / "tasks", task_files)
    out = tmp_path / "out"
    out.mkdir()
    harness = tmp_path / "harness"
    shutil.copytree(ATTACK, harness)
    (harness / "params.json").write_text(json.dumps({
        "tasks_dir": str(tasks), "run_dir": str(out), "port": listener.port, "token": listener.token, "victim_pid": victim.pid,
        "marker": marker, "socket": socket_path}))
    policy = tmp_path / "policy.yaml"
    policy.write_text("name: says hello (MOCK)\nrules: []\ndefault: {reply: hello}\n")
    before = _tree_hash(tasks)
    env = {**os.environ, "OPENAI_API_KEY": secret, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", "eval", "--workspace", str(harness), "--tasks", str(tasks),
                           "-k", "1", "--out", str(out), "--mock-policy", str(policy), "--isolation", "bwrap", "--json", *extra],
                          capture_output=True, text=True, env=env, timeout=600)
    connected = listener.close()
    victim_alive = victim.poll() is None
    victim.kill()
    victim.wait()
    left = _alive_with(marker)
    for pid in left:
        os.kill(pid, 9)
    assert proc.returncode == 3, proc.stderr[-2000:]  # 3: the spent budget ends both trials as infra errors
    results = json.loads(proc.stdout)

    outputs = list(out.rglob("agent-output.txt"))
    assert len(outputs) == 2 and all("MODEL hello" in o.read_text() for o in outputs), "the CLI did not reach the model"
    notes: dict[str, list[dict]] = {}
    for o in outputs:
        for line in o.read_text().splitlines():
            if line.startswith("ATTACK "):
                ev = json.loads(line[len("ATTACK "):])
                notes.setdefault(ev["name"], []).append(ev)
    tally = Tally("command-line agent" if where == "local" else f"command-line agent ({where})")
    assert len(notes) == 13, sorted(notes)
    judged_on_host = ("leave a process behind", "signal a host process", "connect to a listener on the host's loopback")
    for name, evs in notes.items():
        if name not in judged_on_host:
            tally(name, len(evs) == 2 and not any(e["got_through"] for e in evs), LAYER, attempts=len(evs),
                  note=evs[0]["detail"][:80])
    tally("signal a host process", victim_alive, LAYER + ": own pid namespace", attempts=2)
    tally("leave a process behind", not left, LAYER + ": the sandbox's pid namespace ends with the trial", attempts=2)
    net = notes["connect to a listener on the host's loopback"]
    tally("connect to a listener on the host's loopback", not connected and len(net) == 2
          and not any(e["got_through"] for e in net), LAYER + ": own network namespace", attempts=2,
          note=listener.note() or net[0]["detail"][:80])
    run_files = [p for p in out.rglob("*") if p.is_file()]
    tally("the real key in any file of the run folder (the CLI dumped every environment it sees)",
          not any(secret.encode() in p.read_bytes() for p in run_files), "model gateway: the key stays in the host's client",
          attempts=2)
    tally("task folders byte-identical after the run", _tree_hash(tasks) == before, LAYER, attempts=2)
    tally("nothing written into the run folder", not (out / "evil.txt").exists(), LAYER, attempts=2)
    tally("pass@1 stays honest (the agent solves nothing)", results["pass_at_1"] == 0.0, LAYER, attempts=2)
    budget = [json.loads((o.parent / "result.json").read_text())["error"] for o in outputs]
    tally("calls past the trial's budget end the trial as a budget error",
          all("budget of 5 requests is spent" in (b or "") for b in budget), "model gateway: budget", attempts=2,
          note=str(budget[0])[:80])
    refused = [json.loads(line)["refused"] for c in out.rglob("conversation.jsonl")
               for line in c.read_text().splitlines() if "refused" in json.loads(line)]
    tally("each request outside chat completions is recorded as refused",
          sum("is not served" in r for r in refused) == 6 and sum("does not speak HTTP" in r for r in refused) == 2,
          "model gateway: conversation.jsonl", attempts=8, note="; ".join(sorted(set(refused)))[:120])
    tally.check()
