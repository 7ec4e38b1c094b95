"""The bad-input catalogue: each gives one sentence naming the file or field, never a traceback,
and loses nothing finished. Every case runs the real `ahe` command in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ahe.demo import TASKS, X, write_demo
from tests.adversarial.record import Tally

SEED = Path(__file__).resolve().parents[2] / "harness_workspace"
POLICY = "rules:\n  - reply: done\n"


def ahe(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "ahe.cli", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd or Path(os.environ.get("TMPDIR", "/tmp")), env=env)


def answered(proc: subprocess.CompletedProcess, *needles: str) -> tuple[bool, str]:
    """Non-zero exit, no traceback, and the error is one line naming what it must name."""
    err = proc.stderr.strip()
    errors = [ln for ln in err.splitlines() if ln.startswith(("error:", "infrastructure error"))]
    ok = (proc.returncode != 0 and "Traceback" not in err + proc.stdout and len(errors) == 1
          and all(n in errors[0] for n in needles))
    return ok, (errors[0] if errors else err[-300:])


def config(tmp: Path, **changes) -> Path:
    cfg = write_demo(tmp / "exp", iterations=1, k=1)
    data = yaml.safe_load(cfg.read_text())
    data.update(changes)
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    return cfg


def broken_workspace(tmp: Path, name: str, files: dict[str, str], agent_change: dict) -> Path:
    ws = tmp / name
    shutil.copytree(SEED, ws)
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    data = yaml.safe_load((ws / "agent.yaml").read_text())
    data.update(agent_change)
    (ws / "agent.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return ws


def test_bad_input_catalogue(tmp_path):
    tally = Tally("bad input")
    layer = "one sentence (ahe/errors.py, the CLI)"
    (tmp_path / "policy.yaml").write_text(POLICY)

    cfg = tmp_path / "malformed.yaml"
    cfg.write_text("name: demo\ntasks: [unclosed\n")
    ok, line = answered(ahe("evolve", str(cfg)), "malformed.yaml")
    tally("malformed config YAML", ok, layer, note=line)

    ok, line = answered(ahe("evolve", str(config(tmp_path / "a", bogus_key=1)), cwd=tmp_path), "bogus_key", "config.yaml")
    tally("unknown key in the config", ok, layer, note=line)
    ok, line = answered(ahe("evolve", str(config(tmp_path / "b", k="many")), cwd=tmp_path), "config.yaml", "k")
    tally("wrong type in the config", ok, layer, note=line)
    ok, line = answered(ahe("evolve", str(config(tmp_path / "c", tasks=str(tmp_path / "no-such-tasks"))), cwd=tmp_path),
                        "no-such-tasks", "config.yaml")
    ok = ok and not (tmp_path / "runs").exists()  # and no run folder was made for nothing
    tally("missing tasks folder", ok, layer, note=line)

    tasks = tmp_path / "tasks"
    shutil.copytree(TASKS / X, tasks / "bad-toml")
    (tasks / "bad-toml" / "task.toml").write_text('[task\nname = "bad-toml"\n')
    shutil.copytree(TASKS / X, tasks / "no-instruction")
    (tasks / "no-instruction" / "instruction.md").unlink()
    for case, needle in (("bad-toml", "task.toml"), ("no-instruction", "instruction.md")):
        proc = ahe("eval", "--workspace", str(SEED), "--tasks", str(tasks), "--task", case, "-k", "1",
                   "--mock-policy", str(tmp_path / "policy.yaml"), "--out", str(tmp_path / f"out-{case}"))
        ok, line = answered(proc, case, needle)
        tally(f"task: {'task.toml syntax error' if case == 'bad-toml' else 'missing instruction.md'}", ok, layer, note=line)

    ws = broken_workspace(tmp_path, "raising-mw", {"middleware/boom.py": "raise RuntimeError('boom at import')\n"},
                          {"middleware": [{"binding": "middleware.boom:Boom"}]})
    ok, line = answered(ahe("run", "--workspace", str(ws), "-i", "hi", "--mock-policy", str(tmp_path / "policy.yaml"),
                            "--out", str(tmp_path / "out-mw")), "boom.py")
    tally("a middleware that raises at import", ok, layer, note=line)

    ws = broken_workspace(tmp_path, "bad-schema", {"tool_descriptions/run_shell_command.tool.yaml": yaml.safe_dump(
        {"name": "run_shell_command", "description": "x", "input_schema": {"type": "objekt"}})}, {})
    ok, line = answered(ahe("run", "--workspace", str(ws), "-i", "hi", "--mock-policy", str(tmp_path / "policy.yaml"),
                            "--out", str(tmp_path / "out-schema")), "run_shell_command.tool.yaml")
    tally("an invalid tool JSON schema", ok, layer, note=line)

    (tmp_path / "not-a-run").mkdir()
    ok, line = answered(ahe("evolve", "--resume", str(tmp_path / "not-a-run")), "not-a-run")
    tally("--resume on a folder that is not a run", ok, layer, note=line)
    tally.check()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("bwrap") is None,
                    reason="needs root (a private tmpfs mount through unshare -m) and bubblewrap")
def test_a_full_disk_under_the_run_folder(tmp_path):
    """`ahe eval` writing into a 160 KB tmpfs: one sentence, and every result.json there is whole."""
    (tmp_path / "policy.yaml").write_text("rules:\n  - match: {turn: 1}\n    tool_calls: [{name: run_shell_command, "
                                          "arguments: {command: 'seq 1 3000'}}]\n  - reply: done\n")
    small, saved = tmp_path / "small", tmp_path / "saved"
    small.mkdir()
    script = (f"mount -t tmpfs -o size=160k tmpfs {small} || exit 99; "
              f"{sys.executable} -m ahe.cli eval --workspace {SEED} --tasks {TASKS} -k 6 --concurrency 2 "
              f"--task {X} --mock-policy {tmp_path / 'policy.yaml'} --out {small / 'run'} --json > {tmp_path / 'out.txt'} "
              f"2> {tmp_path / 'err.txt'}; echo $? > {tmp_path / 'rc.txt'}; cp -a {small / 'run'} {saved}")
    subprocess.run(["unshare", "-m", "sh", "-c", script], timeout=300, check=False)
    if (tmp_path / "rc.txt").read_text().strip() == "99":
        pytest.skip("cannot mount a tmpfs here")
    err = (tmp_path / "err.txt").read_text()
    rc = int((tmp_path / "rc.txt").read_text())
    results = list(saved.glob("rollouts/*/*/result.json"))
    whole = all(json.loads(p.read_text()).get("task") == X for p in results)
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    ok = rc != 0 and "Traceback" not in err and len(errors) == 1 and "space" in errors[0] and whole
    Tally("bad input")("a full disk under the run folder (160 KB tmpfs)", ok, "one sentence; atomic writes",
                       note=(errors[0] if errors else err[-300:]) + f"; {len(results)} finished trials intact")
    assert ok, err[-2000:]
