"""`ahe tasks generate` against the scripted MOCK generator, end to end over real HTTP, in
real bwrap: every stage runs, the planted faults are caught and logged, and a kill at any
stage resumes without redoing a finished unit."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ahe.tasks.check import check_tasks
from ahe.tasks.loader import load_tasks
from ahe.tasks.sources.playground.generate.context import STAGES

REPO = Path(__file__).resolve().parent.parent
POLICY = REPO / "examples" / "policies" / "playground-generator.yaml"
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


def generate(out: Path, base_url: str, kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENAI_BASE_URL": base_url, "AHE_MODEL": "mock-generator"}
    env.pop("AHE_PLAYGROUND_KILL_AT", None)
    if kill_at:
        env["AHE_PLAYGROUND_KILL_AT"] = kill_at
    return subprocess.run([sys.executable, "-m", "ahe.cli", "tasks", "generate", "--out", str(out), "--projects", "1",
                           "--price-input", "2.5", "--price-output", "10"],
                          capture_output=True, text=True, timeout=300, env=env)


def _server():
    from ahe.testing import MockLLMServer, load_policy

    server = MockLLMServer(load_policy(POLICY))
    return server, server.start()


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gen") / "out"
    server, url = _server()
    try:
        proc = generate(out, url)
        requests = len(server.requests)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, requests, proc


def _events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]


def test_every_stage_runs_and_the_planted_faults_are_rejected_with_reasons(full_run):
    out, requests, proc = full_run
    events = _events(out)
    done = Counter((e["stage"], e["unit"]) for e in events if e["event"] == "done")
    assert {s for s, _ in done} == {"propose", "plan", "scaffold", "tests", "reference"}
    rejected = {(e["stage"], e["what"]): e["reason"] for e in events if e["event"] == "rejected"}
    assert "not Python" in rejected[("propose", "project #2 (ferrous)")]
    assert rejected[("plan", "task primes, test test_gcd_basic")] == "duplicate test name"
    assert "NotImplementedError" in rejected[("tests", "IsPrimeTest.test_stub_raises")]
    assert "passes on the scaffold" in rejected[("tests", "IsPrimeTest.test_functions_exist")]
    # the planted bad test fails on the reference: rejected, the task kept
    assert "fails on a reference" in rejected[("reference", "LcmTest.test_lcm_of_multiples")]
    # the planted task the reference cannot pass: dropped
    assert "cannot pass its tests (3 of 3 fail)" in rejected[("reference", "task")]
    project = out / "projects" / "mathbits" / "project"
    manifest = (project / "playground.toml").read_text()
    assert 'name = "gcd"' in manifest and 'name = "primes"' in manifest and 'name = "fib"' not in manifest
    gcd_tests = (project / "tests" / "test_gcd.py").read_text()
    assert "test_lcm_of_multiples" not in gcd_tests and "test_gcd_zero" in gcd_tests
    assert "NotImplementedError" not in (project / "tests" / "test_primes.py").read_text()
    assert not (project / "tests" / "test_fib.py").exists()


def test_the_reference_is_written_with_the_tests_hidden(full_run):
    out = full_run[0]
    trace = json.loads((out / "traces" / "reference" / "mathbits-primes" / "trajectory.json").read_text())
    listing = [r["content"] for s in trace["steps"] for r in (s.get("observation") or {}).get("results", [])
               if r["extra"]["tool"] == "list_files"]
    assert listing and "mathbits/numbers.py" in listing[0] and "tests/" not in listing[0]


def test_tokens_and_cost_are_accounted_per_stage(full_run):
    out, requests, proc = full_run
    summary = json.loads((out / "generation.json").read_text())
    for stage in ("propose", "plan", "scaffold", "tests", "reference"):
        row = summary["stages"][stage]
        assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0
        assert row["cost_usd"] == pytest.approx((row["prompt_tokens"] * 2.5 + row["completion_tokens"] * 10) / 1e6)
    assert summary["stages"]["reference"]["dropped"] == 1
    assert "cost" in proc.stdout and "propose" in proc.stdout


def test_the_generated_tasks_pass_ahe_tasks_check(full_run):
    out = full_run[0]
    derive = json.loads((out / "tasks" / "derive.json").read_text())
    assert set(derive["counts"]) == {"implement", "library", "fix", "reproduce"}
    loaded = load_tasks(out / "tasks")
    assert not loaded.errors and len(loaded.tasks) == len(derive["tasks"])
    picked = {t.metadata["kind"]: t for t in loaded.tasks}
    report = asyncio.run(check_tasks(list(picked.values()), concurrency=4))
    assert report.ok, [(r.name, r.oracle.detail, r.nop.detail, r.leak.detail) for r in report.tasks]


def test_killed_at_each_stage_resumes_without_redoing_a_finished_unit(full_run, tmp_path):
    """One folder, killed once in every stage in turn (SIGKILL right after the stage's first
    unit is written), resumed each time: the model sees exactly the requests of one clean run,
    every unit is done once, and the result is the same."""
    reference_out, reference_requests, _ = full_run
    out = tmp_path / "out"
    server, url = _server()
    try:
        for stage in STAGES:
            proc = generate(out, url, kill_at=stage)
            assert proc.returncode == -9, (stage, proc.returncode, proc.stderr[-2000:])
            last_done = [e for e in _events(out) if e["event"] == "done"][-1] if stage != "derive" else None
            assert stage == "derive" or last_done["stage"] == stage
        assert (out / "tasks" / "derive.json").is_file()
        proc = generate(out, url)
        assert proc.returncode == 0, proc.stderr[-2000:]
        requests = len(server.requests)
    finally:
        server.stop()
    assert requests == reference_requests
    done = Counter((e["stage"], e["unit"]) for e in _events(out) if e["event"] == "done")
    assert done and set(done.values()) == {1}
    names = lambda o: sorted(t["name"] for t in json.loads((o / "tasks" / "derive.json").read_text())["tasks"])  # noqa: E731
    assert names(out) == names(reference_out)
