"""A jail never outlives the process that started it: a parent-death signal set before bwrap
runs, and a sweep for jails whose starter is gone.

bwrap's own `--die-with-parent` is set by bwrap once it runs, so a starter killed between the
fork and that moment (a Ray node killed while a trial starts its sandbox) leaves the outer
bwrap running, reparented to init. `die_with_parent()` closes that window: in the child,
before bwrap is executed, it asks for SIGKILL at the parent's death and exits at once if the
parent is already gone. `sweep_orphan_jails()` ends any jail left by a starter that died
anyway (an older AHE, a setuid bwrap that drops the signal at exec); a Ray trial runner calls
it when it starts. Jails are recognised by OWNER_ENV, the starter's pid, in bwrap's
environment: a marked outer bwrap whose parent is no longer that pid is an orphan.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import signal
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

OWNER_ENV = "AHE_SANDBOX_OWNER"
_PR_SET_PDEATHSIG = 1


@functools.lru_cache(maxsize=1)
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, loaded before any fork (the child must not load libraries)."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    fn.restype = ctypes.c_int
    return fn


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` for the jail's Popen: SIGKILL when this process dies, race-free."""
    prctl = _prctl()
    if prctl is None:  # not Linux glibc/musl: bwrap's own --die-with-parent still applies
        return None
    parent = os.getpid()

    def preexec() -> None:  # runs in the forked child: no imports, no allocation of note
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the starter died before the signal was armed
            os._exit(1)

    return preexec


def owner_env() -> dict[str, str]:
    """The marker put in bwrap's environment (the driver inside ignores it)."""
    return {OWNER_ENV: str(os.getpid())}


def _stat(pid: str) -> tuple[str, int] | None:
    """(comm, ppid) of a process, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = raw[raw.find("(") + 1 : raw.rfind(")")]
    fields = raw[raw.rfind(")") + 2 :].split()
    return comm, int(fields[1])


def _owner(pid: str) -> int | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or another user's
        return None
    prefix = OWNER_ENV.encode() + b"="
    for item in env.split(b"\0"):
        if item.startswith(prefix) and item[len(prefix):].isdigit():
            return int(item[len(prefix):])
    return None


def orphan_jails() -> list[int]:
    """Pids of outer bwrap processes of this user whose starter is no longer their parent."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        st = _stat(d.name)
        if st is None or st[0] != "bwrap":
            continue
        parent = _stat(str(st[1]))
        if parent is not None and parent[0] == "bwrap":
            continue  # the jail's init, child of its outer bwrap: judged through that one
        owner = _owner(d.name)
        if owner is not None and owner != st[1] and owner != os.getpid():
            found.append(int(d.name))
    return found


def sweep_orphan_jails() -> list[int]:
    """SIGKILL every orphaned jail (its outer bwrap and the jail's init, which takes the pid
    namespace and every process of the jail with it); return the outer pids ended."""
    swept = []
    for pid in orphan_jails():
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            kids = []
        for target in [pid, *map(int, kids)]:
            try:
                os.kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
        swept.append(pid)
    if swept:
        log.warning("ended %d sandbox jail(s) left running by a process that died: pids %s", len(swept), swept)
    return swept
