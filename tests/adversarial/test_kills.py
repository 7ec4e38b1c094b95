"""SIGKILL at 10 random moments of a 3-iteration run, resumed each time: the same result as an
uninterrupted run, and no finished trial ran twice.

The run is `ahe demo`'s scenario (three bundled tasks, scripted MOCK models over real HTTP,
real bwrap, real git). Kill moments are drawn from a seeded generator over the uninterrupted
run's duration; each kill hits the running `ahe evolve` process (its sandboxes die with it).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ahe.demo import write_demo
from tests.adversarial.record import Tally
from tests.test_loop_e2e import evolve, outcome

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
KILLS = 10
SEED = int(os.environ.get("AHE_KILL_SEED", "20261125"))


def _phase(run: Path) -> str:
    """Where the run was: the last phase it had finished."""
    try:
        done = json.loads((run / "loop_state.json").read_text()).get("done") or {}
    except (OSError, ValueError):
        return "start"
    last = [f"{it}/{phases[-1]}" for it, phases in sorted(done.items()) if phases]
    return f"after {last[-1]}" if last else "start"


def _events(run: Path) -> int:
    try:
        return (run / "events.jsonl").read_bytes().count(b"\n")
    except OSError:
        return 0


def _killable(run: Path, margin: float) -> list[int]:
    """Event counts after which the uninterrupted run still worked `margin` seconds: a kill aimed
    there (plus at most `margin` / 2 of jitter) lands on a running process, never after the end."""
    stamps = [json.loads(line)["ts"] for line in (run / "events.jsonl").read_text().splitlines()]
    return [n for n in range(1, len(stamps)) if stamps[-1] - stamps[n - 1] > margin]


def test_ten_random_kills_resume_to_the_uninterrupted_result(tmp_path):
    ref_cfg = write_demo(tmp_path / "ref")
    t0 = time.monotonic()
    ref = evolve(str(ref_cfg), "--run-dir", str(tmp_path / "ref" / "run"))
    duration = time.monotonic() - t0
    assert ref.returncode == 0, ref.stderr
    total_events = _events(tmp_path / "ref" / "run")
    expected = outcome(tmp_path / "ref" / "run")

    cfg = write_demo(tmp_path / "killed")
    run = tmp_path / "killed" / "run"
    rng = random.Random(SEED)
    # ten random moments of the run, as points on its event log (spread over all phases), plus jitter;
    # never the last instants (the end of the last rollout is 70 ms before the run ends: a kill
    # aimed there with jitter found the run finished, and the test counted 9 kills, not a bug)
    max_jitter = 0.5
    targets = sorted(rng.sample(_killable(tmp_path / "ref" / "run", 2 * max_jitter), KILLS))
    finished: dict[Path, str] = {}
    moments, landed = [], []
    for i in range(KILLS):
        args = ["--resume", str(run)] if i else [str(cfg), "--run-dir", str(run)]
        proc = subprocess.Popen([sys.executable, "-m", "ahe.cli", "evolve", *args, "-q"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        jitter = rng.uniform(0, max_jitter)
        deadline = time.monotonic() + duration * 2
        while proc.poll() is None and _events(run) < targets[i] and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(jitter)
        if proc.poll() is None:
            landed.append(_phase(run))
            proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        moments.append(targets[i])
        assert "Traceback" not in err, err
        assert proc.returncode in (0, -signal.SIGKILL), f"ahe evolve stopped by itself ({proc.returncode}): {err}"
        for p in run.glob("iterations/*/rollouts/*/*/result.json"):
            finished.setdefault(p, p.read_text())
        if proc.returncode == 0:
            break  # the run finished before this kill: fewer kills landed (reported)
    resumed = evolve("--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr
    same = outcome(run) == expected
    rerun = [str(p.relative_to(run)) for p, text in finished.items() if p.read_text() != text]
    tally = Tally("kills")
    tally(f"SIGKILL at {len(landed)} random moments, resumed each time", same and len(landed) == KILLS,
          "run folder: atomic writes, loop_state, per-trial result.json", attempts=len(landed), good="survived",
          note=f"killed at events {moments} of {total_events} (seed {SEED}): {'; '.join(landed)}")
    tally("finished trials lost or re-run", not rerun and len(finished) > 0, "scheduler: result.json last, skipped on resume",
          attempts=len(finished), good="survived", note=f"{len(finished)} finished trials checked, {len(rerun)} changed")
    (tmp_path / "kills.json").write_text(json.dumps({"landed": landed, "moments": moments, "finished": len(finished)}))
    tally.check()
