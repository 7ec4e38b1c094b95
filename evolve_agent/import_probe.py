"""Load a candidate workspace in a throwaway process first, and refuse code whose import acts outside it.

`load_agent` imports the workspace's tools/ and middleware/ modules in AHE's own process, so a
module whose import writes a file, deletes one, connects to a socket or starts a process would
act on the host the moment the gate (or `record_change`) loads it. The probe loads it first in a
child process (inside bwrap when there is one: read-only system, private /tmp, no network) with
a Python audit hook that *blocks and reports* any such operation whose target is outside the
workspace. A workspace that does any is refused before AHE's own process ever imports it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

TIMEOUT_SEC = 60
SOURCE_ROOT = Path(__file__).resolve().parents[1]  # holds ahe/ and evolve_agent/

# Runs in the child: argv[1] = the workspace, argv[2] = AHE's source root (the same AHE as the
# parent's, whatever the install points at). Prints one JSON line {"violations": [...]}.
_PROBE = r'''
import json, os, sys
root = os.path.realpath(sys.argv[1])
sys.path.insert(0, sys.argv[2])
sys.dont_write_bytecode = True
from ahe.runtime import load_agent  # AHE's own imports happen before the hook
seen = []
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
def inside(p):
    try:
        p = os.fsdecode(p) if not isinstance(p, int) else None
    except Exception:
        return False
    if p is None:
        return True  # an fd the module already holds
    p = os.path.realpath(p)
    return p == root or p.startswith(root + os.sep)
def deny(what):
    seen.append(what)
    raise PermissionError("AHE import probe: " + what + " is not allowed while a workspace module is imported")
def hook(event, args):
    if event == "open":
        path, mode, flags = args
        writing = (mode is not None and any(c in str(mode) for c in "wax+")) or (mode is None and flags & WRITE_FLAGS)
        if writing and not inside(path):
            deny("open(%r, %r)" % (path, mode or flags))
    elif event in ("os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.utime",
                   "shutil.rmtree", "os.listxattr") and args and not inside(args[0]):
        if event != "os.listxattr":
            deny("%s(%r)" % (event, args[0]))
    elif event in ("os.rename", "os.link", "os.symlink", "shutil.copyfile", "shutil.move") and len(args) > 1 \
            and not (inside(args[0]) and inside(args[1])):
        deny("%s(%r, %r)" % (event, args[0], args[1]))
    elif event in ("socket.connect", "socket.sendto", "socket.bind"):
        deny("%s(%r)" % (event, args[1] if len(args) > 1 else args))
    elif event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                   "os.forkpty", "os.kill", "os.killpg", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym"):
        deny("%s(%r)" % (event, args[0] if args else ""))
sys.addaudithook(hook)
error = None
try:
    load_agent(root)
except BaseException as exc:
    error = "%s: %s" % (type(exc).__name__, exc)
sys.stdout.write(json.dumps({"violations": seen, "error": error}) + "\n")
sys.stdout.flush()
os._exit(0)
'''


def _argv(root: Path) -> list[str]:
    """The child's command line: inside bwrap (read-only /, private /tmp, no network) when possible."""
    child = [sys.executable, "-c", _PROBE, str(root), str(SOURCE_ROOT)]
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return child
    return [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            *_code_binds(), "--bind", str(root), str(root), "--unshare-net", "--unshare-pid", "--unshare-ipc",
            "--die-with-parent", "--new-session", *child]


def _code_binds() -> list[str]:
    """AHE's own source and the interpreter's prefix, read-only, so the child can import AHE even
    when they live under /tmp (a checkout or a venv there), which the jail replaces."""
    binds: list[str] = []
    for path in {SOURCE_ROOT, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}:
        if path.is_dir():
            binds += ["--ro-bind", str(path), str(path)]
    return binds


def import_side_effects(root: Path) -> list[str]:
    """What the workspace's modules try to do outside it while they are imported (empty: nothing)."""
    root = Path(root).resolve()
    try:
        proc = subprocess.run(_argv(root), capture_output=True, text=True, timeout=TIMEOUT_SEC, cwd=str(root))
    except subprocess.TimeoutExpired:
        return [f"importing the workspace did not finish within {TIMEOUT_SEC} s"]
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
    if line is None:
        if "bwrap" in (proc.stderr or "") and shutil.which("bwrap"):
            # bwrap cannot run here (no user namespaces): probe without the jail, the hook still blocks
            proc = subprocess.run(_argv(root)[-5:], capture_output=True, text=True, timeout=TIMEOUT_SEC, cwd=str(root))
            line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
        if line is None:
            tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
            return [f"importing the workspace killed its process ({tail[0][:200]})"]
    return list(json.loads(line).get("violations") or [])
