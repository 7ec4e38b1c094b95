"""A jail never outlives the process that started it: kill -9 the starter and nothing of the
jail runs on; a jail orphaned anyway is found and ended by the sweep a runner does at start."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ahe.sandbox import bwrap as bw
from ahe.sandbox.local import LocalSandbox
from ahe.sandbox.local_orphans import OWNER_ENV, die_with_parent, orphan_jails, sweep_orphan_jails
from tests.conftest import REPO, remove_temp_folders_of

pytestmark = pytest.mark.bwrap

STARTER = """
import asyncio, sys
from pathlib import Path
from ahe.sandbox.local import LocalSandbox

async def main():
    sb = LocalSandbox(Path(sys.argv[1]), isolation="bwrap")
    await sb.start()
    await sb.exec("sleep 1000", timeout=None, background=True)
    print(sb._proc.pid, flush=True)
    await asyncio.sleep(1000)

asyncio.run(main())
"""


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"  # a zombie waits for init to reap it: it runs nothing


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = [int(k) for k in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


def wait_dead(pids: list[int], within: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def test_killing_the_starter_ends_the_whole_jail(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path / "app")], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        outer = int(starter.stdout.readline())
        jail = [outer] + descendants(outer)
        assert len(jail) >= 3, jail  # outer bwrap, the driver (the jail's pid 1), the agent's sleep
        starter.kill()  # kill -9: no stop(), no finalizer, no atexit
        starter.wait(timeout=10)
        assert wait_dead(jail) == [], f"still running after the starter was killed: {jail}"
        assert outer not in orphan_jails()
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
        remove_temp_folders_of(starter.pid)


ORPHAN_MAKER = """
import os, subprocess, sys
argv = [a for a in eval(sys.argv[1]) if a != "--die-with-parent"]  # an old AHE's jail, say
p = subprocess.Popen(argv, env={"PATH": "/usr/bin:/bin", %r: str(os.getpid())}, start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(p.pid, flush=True)
os._exit(0)
""" % OWNER_ENV


def test_the_sweep_ends_orphaned_jails_and_spares_live_ones(tmp_path):
    argv = bw.bwrap_argv(bw.find_bwrap(), [], ["sleep", "1000"])
    maker = subprocess.run([sys.executable, "-c", ORPHAN_MAKER, repr(argv)], capture_output=True, text=True, timeout=30)
    orphan = int(maker.stdout.strip())
    jail = [orphan] + descendants(orphan)

    async def with_a_live_sandbox() -> tuple[list[int], int]:
        async with LocalSandbox(tmp_path / "app", isolation="bwrap") as sb:
            swept = sweep_orphan_jails()
            assert (await sb.exec("echo alive", timeout=10)).stdout == "alive\n"  # ours was spared
            return swept, sb._proc.pid

    try:
        assert alive(orphan), "the orphan died by itself: nothing to sweep"
        swept, live = asyncio.run(with_a_live_sandbox())
        assert orphan in swept and live not in swept
        assert wait_dead(jail) == [], f"the swept jail still runs: {jail}"
    finally:
        for pid in jail:
            if alive(pid):
                os.kill(pid, 9)


def test_the_death_signal_refuses_to_start_after_its_parent_died():
    """The window bwrap's own --die-with-parent leaves: the starter dies before it is armed."""
    marker = f"1000.{os.getpid()}{time.monotonic_ns() % 100000}"  # a `sleep` no other test runs
    script = (
        "import os, subprocess, sys, time\n"
        "from ahe.sandbox.local_orphans import die_with_parent\n"
        "pre = die_with_parent()\n"
        "def late():\n"
        "    os.kill(os.getppid(), 9); time.sleep(0.5); pre()\n"
        f"subprocess.Popen(['sleep', {marker!r}], preexec_fn=late, start_new_session=True,\n"
        "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=30)
    assert proc.returncode == -9, proc.stderr
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _running(marker):
        time.sleep(0.1)
    started = _running(marker)
    for pid in started:
        os.kill(pid, 9)
    assert not started, "the child ran on although its parent died before the signal was armed"


def _running(arg: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and arg.encode() in (d / "cmdline").read_bytes().split(b"\0"):
                out.append(int(d.name))
        except OSError:
            continue
    return [p for p in out if alive(p) and p != os.getpid()]
