"""The benchmarks in bench/ still run: each script at its smallest size (no timings asserted).

Benchmarks are not part of the test suite; this only keeps them from rotting. Peers are
left out (they live in their own virtualenv, see bench/setup_peers.sh).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docker_support import docker_engine  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"


def run(script: str, out: Path, *args: str) -> dict:
    p = subprocess.run([sys.executable, str(BENCH / script), "--out", str(out), *args], capture_output=True, text=True,
                       timeout=240, cwd=str(REPO))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "|" in p.stdout  # a table was printed
    data = json.loads(out.read_text())
    assert data["machine"]["cores"] >= 1
    return data


def test_overhead_smoke(tmp_path):
    data = run("bench_overhead.py", tmp_path / "o.json", "--calls", "5", "--repeat", "1", "--peers", "none", "--no-shell")
    (row,) = data["configs"]
    assert row["label"] == "AHE" and row["runs"] == 1 and row["step_median"] > 0
    assert set(row["split"]) >= {"model_client", "dispatch", "trace", "loop", "total"}
    assert data["runtime_alone_ms_per_step"] > 0


def test_concurrency_smoke(tmp_path):
    data = run("bench_concurrency.py", tmp_path / "c.json", "--sessions", "2", "--latency", "0.05", "--calls", "3",
               "--configs", "ahe-noop", "--peers", "none")
    (row,) = data["results"]
    assert row["sessions"] == 2 and row["runs"] == 1 and 0 < row["efficiency"] <= 1.01


@pytest.mark.skipif(importlib.util.find_spec("minisweagent") is not None,
                    reason="needs a Python without mini-swe-agent (the `mini` extra is installed here)")
def test_a_failing_peer_says_why(tmp_path):
    """A peer that cannot run (here: this python, which lacks mini-swe-agent) is reported with
    its exit code and the tail of its stderr, not an empty "FAILED:"."""
    p = subprocess.run([sys.executable, str(BENCH / "bench_concurrency.py"), "--out", str(tmp_path / "c.json"),
                        "--sessions", "2", "--latency", "0.05", "--calls", "3", "--configs", "ahe-noop", "--peers", "mini"],
                       capture_output=True, text=True, timeout=240, cwd=str(REPO),
                       env={**os.environ, "AHE_BENCH_PEER_PYTHON": sys.executable})
    assert p.returncode == 0, p.stderr[-3000:]
    assert "mini      M=2    FAILED: no ready line: the worker printed nothing instead of a JSON line, exit code 1" in p.stderr
    assert "ModuleNotFoundError: No module named 'minisweagent'" in p.stderr
    (mini,) = [r for r in json.loads((tmp_path / "c.json").read_text())["results"] if r["config"] == "mini"]
    assert "minisweagent" in mini["errors"][0]


@pytest.mark.bwrap
def test_confine_smoke(tmp_path):
    data = run("bench_confine.py", tmp_path / "cf.json", "--calls", "5", "--repeat", "1", "--sessions", "2",
               "--latency", "0.05")
    assert set(data["overhead"]) == {"inproc|noop", "confined|noop", "inproc|shell", "confined|shell"}
    assert all(len(v["overhead"]) == 1 for v in data["overhead"].values())
    assert {k: v["ok"] for k, v in data["concurrency"].items()} == {"inproc|2": True, "confined|2": True}


def test_bookkeeping_smoke(tmp_path):
    data = run("bench_bookkeeping.py", tmp_path / "b.json", "--tasks", "4", "--repeat", "1")
    assert data["check"]["done_trials"] == 8 and data["check"]["pending"] == 0
    assert data["check"]["rolled_back"]  # the synthetic manifest has changes judged `rollback`
    assert data["total_ms"] > 0


def test_traces_smoke(tmp_path):
    data = run("bench_traces.py", tmp_path / "t.json", "--tasks", "2", "--turns", "3", "--repeat", "1")
    assert data["raw_mb"] > 0
    if not data["notes"]:  # the debugger exposes Cleaner and build_corpus
        assert data["clean_mb_s"] > 0 and data["corpus_1_mb_s"] > 0


def test_startup_smoke(tmp_path):
    if not (Path(sys.executable).parent / "ahe").exists():
        pytest.skip("the ahe console script is not installed next to this Python")
    data = run("bench_startup.py", tmp_path / "s.json", "--runs", "1")
    labels = {r["label"] for r in data["results"] if "median_ms" in r}
    assert {"ahe --help", "ahe eval --help"} <= labels


def test_foresight_smoke(tmp_path):
    data = run("bench_foresight.py", tmp_path / "f.json", "--tasks", "2", "--trials", "1", "--turns", "3", "--runs", "1")
    assert [r["trials"] for r in data["speed"]] == [2, 2, 2]
    assert data["scenarios"]["union"]["recall"] == 1.0


@pytest.mark.skipif(__import__("shutil").which("bwrap") is None, reason="bubblewrap is not installed")
def test_sandbox_smoke(tmp_path):
    driver = REPO / "ahe" / "sandbox" / "local_driver.py"
    data = run("bench_sandbox.py", tmp_path / "sb.json", "--execs", "30", "--baseline-driver", str(driver))
    assert len(data["drivers"]) == 2
    for r in data["drivers"].values():  # two sandboxes taking turns, each measured
        assert r["execs"] == 30 and 0 < r["cpu_total_ms"] and r["cpu_sandbox_ms"] > 0
        assert 0 < r["wall_p10_ms"] <= r["wall_median_ms"] <= r["wall_p90_ms"]


def test_bad_peer_name_is_one_sentence_listing_the_valid_ones():
    for script, valid in (("bench_overhead.py", "mini, openai-agents, smolagents"), ("bench_concurrency.py", "mini")):
        p = subprocess.run([sys.executable, str(BENCH / script), "--peers", "mini-swe-agent"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2
        assert "Traceback" not in p.stderr
        assert p.stderr.strip().count("\n") == 0, p.stderr
        assert "'mini-swe-agent'" in p.stderr and valid in p.stderr


def test_seal_smoke(tmp_path):
    data = run("bench_seal.py", tmp_path / "s.json", "--repeat", "1")
    assert data["tasks"] >= 1 and data["snapshot_kib"] > 0
    assert data["ms"]["seal (cold, run start)"]["median"] > 0


@pytest.mark.bwrap
@pytest.mark.skipif(importlib.util.find_spec("minisweagent") is None, reason="mini-swe-agent is not installed: pip install -e '.[mini]'")
def test_backends_smoke(tmp_path):
    data = run("bench_backends.py", tmp_path / "b.json", "--calls", "3", "--repeat", "1", "--shells", "local")
    runs = data["runs"]
    assert runs["direct|local"]["step"] and runs["backend|local"]["step"] and runs["backend|local"]["cpu"][0] > 0


@pytest.mark.docker
def test_worker_start_smoke(tmp_path, docker_engine):  # noqa: F811 - fixture
    out = tmp_path / "ws.json"
    p = subprocess.run([sys.executable, str(BENCH / "bench_worker_start.py"), "--runs", "1", "--concurrent", "2",
                        "--out", str(out)], capture_output=True, text=True, timeout=240, cwd=str(REPO),
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    data = json.loads(out.read_text())
    for kind in ("bwrap", "docker"):
        assert data[kind]["ready_ms"] > 0 and data[kind]["all_ready_ms"] > 0


def _forecast_bench(script: str, out: Path, runs: list[str], *args: str, tmp_path_factory) -> tuple[list[dict], str]:
    """A forecast bench in its tiny mode: its run folders already in `out` (copies of the shared demo
    run: `--reuse` evolves nothing), one check run, so only the plans and the table are made."""
    from tests.shared_runs import copy_run, line_demo

    demo = line_demo(tmp_path_factory)
    for name in runs:
        copy_run(demo, out / name / "run", ignore=__import__("shutil").ignore_patterns("workspace"))
    p = subprocess.run([sys.executable, str(BENCH / script), "--out", str(out), "--checks", "1", "--reuse", *args],
                       capture_output=True, text=True, timeout=120, cwd=str(REPO))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    return rows, p.stdout


@pytest.mark.skipif(__import__("shutil").which("bwrap") is None, reason="bubblewrap is not installed (the demo run)")
def test_forecast_smoke(tmp_path, tmp_path_factory):
    rows, out = _forecast_bench("bench_forecast.py", tmp_path, ["g0-fit", "g0-check0"], "--groups", "1",
                                tmp_path_factory=tmp_path_factory)
    (row,) = rows
    actual = json.loads((tmp_path / "g0-check0" / "run" / "scores.json").read_text())["totals"]["tokens"]["total"]
    assert (row["group"], row["pad"], row["iterations"], row["k"], row["policy"]) == (0, [0, 0], 3, 2, "paper")
    assert row["actual"] == actual > 0 and 0 < row["low"] <= row["forecast"] <= row["high"]
    assert {"error", "within25", "covered", "wall_forecast_s", "wall_actual_s", "wall_covered"} <= set(row)
    assert f"| 0 (0, 0) | 3 | 2 | paper | {row['forecast']:,} | {row['low']:,}–{row['high']:,} | {actual:,} |" in out
    assert "\n1 check runs: forecast within ±25% for " in out and "mismatched source" not in out  # one group: no other source


@pytest.mark.skipif(__import__("shutil").which("bwrap") is None, reason="bubblewrap is not installed (the demo run)")
def test_forecast_configs_smoke(tmp_path, tmp_path_factory):
    rows, out = _forecast_bench("bench_forecast_configs.py", tmp_path, ["fit/best-of-n", "check/best-of-n-0"],
                                "--families", "best-of-n", tmp_path_factory=tmp_path_factory)
    fit, row = rows
    assert fit["family"] == "best-of-n" and fit["fit"] == str(tmp_path / "fit" / "best-of-n" / "run")
    assert (row["family"], row["iterations"], row["k"]) == ("best-of-n", 2, 2)
    assert row["actual"] > 0 and 0 < row["low"] <= row["forecast"] <= row["high"]
    assert {"agent", "evolve", "debugger"} <= set(row["role_errors"])
    table = (tmp_path / "table.md").read_text()
    assert table.startswith("| family | iterations | k | forecast |") and out.rstrip().endswith(table.rstrip())
    assert "\n1 check runs: forecast within ±25 % for " in table
