"""Fault injection for the resume tests, shared by the loop and best-of-N."""

from __future__ import annotations

import asyncio
import os
import signal


def maybe_kill_self(phase_key: str) -> None:
    """Fault injection for resume tests: AHE_KILL_AT=<iteration>/<phase>[+seconds] SIGKILLs
    this process at the start of that phase (or that many seconds into it)."""
    spec = os.environ.get("AHE_KILL_AT")
    if not spec:
        return
    target, _, delay = spec.partition("+")
    if target != phase_key:
        return
    if delay:
        asyncio.get_running_loop().call_later(float(delay), os.kill, os.getpid(), signal.SIGKILL)
    else:
        os.kill(os.getpid(), signal.SIGKILL)
