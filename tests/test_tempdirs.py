"""Temporary folders of a process killed outright are swept by the next AHE command."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ahe.tempdirs import make_temp_dir, sweep_stale


def test_folders_of_dead_owners_are_swept_and_live_ones_kept(tmp_path):
    code = "from ahe.tempdirs import make_temp_dir; print(make_temp_dir('sandbox'))"
    dead = Path(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip())
    (dead / "logs").mkdir()
    (dead / "logs" / "out.txt").write_text("x")
    mine = make_temp_dir("gate")
    other = Path(tempfile.mkdtemp(prefix="ahe-sandbox-no-pid-"))  # not ours by name: never touched
    old = time.time() - 60
    for p in (dead, mine, other):
        os.utime(p, (old, old))
    try:
        removed = sweep_stale()
        assert dead in removed and not dead.exists()
        assert mine.exists() and other.exists()
    finally:
        for p in (mine, other):
            os.rmdir(p)


def test_the_cli_sweeps_on_start(tmp_path):
    code = "from ahe.tempdirs import make_temp_dir; print(make_temp_dir('evolve-jail'))"
    dead = Path(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip())
    old = time.time() - 60
    os.utime(dead, (old, old))
    subprocess.run([sys.executable, "-m", "ahe.cli", "--help"], capture_output=True, timeout=60, check=True)
    assert not dead.exists()


def test_every_temporary_folder_of_ahe_follows_the_rule():
    """A folder made straight in the temporary directory without the owner's pid in its name
    cannot be swept after a kill (CI once found `ahe-bwrap-check-*` left by killed processes)."""
    import re

    root = Path(__file__).resolve().parents[1] / "ahe"
    standalone = {"runner.py", "verify.py"}  # copied into task folders and run without AHE
    pattern = re.compile(r"tempfile\.(TemporaryDirectory|mkdtemp|mkstemp|NamedTemporaryFile)\((.*)$", re.M)
    offenders = []
    for path in root.rglob("*.py"):
        if path.name == "tempdirs.py" or path.name in standalone:
            continue
        for m in pattern.finditer(path.read_text()):
            if "dir=" not in m.group(2):  # elsewhere than the temporary directory: its owner's business
                offenders.append(f"{path.relative_to(root.parent)}: {m.group(0)}")
    assert offenders == [], "use ahe.tempdirs.temp_dir/make_temp_dir instead: " + "; ".join(offenders)
