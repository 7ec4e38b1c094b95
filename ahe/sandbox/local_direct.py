"""The driver's second door: a listening socket for a confined worker's direct channel.

A confined session's commands used to go worker -> AHE -> driver -> AHE -> worker: four
process wake-ups per command. The jailed driver now also inherits a listening unix socket
whose path lies in a private temporary folder on the host (never inside the sandbox, so the
agent's commands cannot reach it); AHE links that path into the worker's socket folder, and
the worker sends its `exec` requests to the driver itself (ahe/confine/direct.py). The driver
runs them exactly as AHE's own: inside the sandbox, output in /logs/exec/NNNN.{stdout,stderr}.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

from ahe.tempdirs import make_temp_dir

SOCKET = "driver.sock"


def direct_listener() -> tuple[str, socket.socket]:
    """(private folder, listening socket in it); the caller hands the socket to the driver."""
    folder = str(make_temp_dir("driver"))
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = os.path.join(folder, SOCKET)
    lsock.bind(path)
    os.chmod(path, 0o600)
    lsock.listen(16)
    return folder, lsock


def next_exec_number(exec_dir: Path) -> int:
    """One past the highest command number whose output is in `exec_dir` (spares left alone:
    the driver is still running and owns them)."""
    if not exec_dir.is_dir():
        return 1
    numbers = [int(m.group(1)) for p in exec_dir.iterdir() if (m := re.fullmatch(r"(\d+)\.std(?:out|err)", p.name))]
    return max(numbers, default=0) + 1
