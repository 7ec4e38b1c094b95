"""The worker's jail: what a confined session can see, in one place (bwrap locally).

Only the interpreter and its libraries, AHE's own package, the workspace (read-only), a
private size-limited /trace and /tmp, and the trial's socket folder. No /etc, no home, no
task folder, no run folder, no other trial; no network; its own pid namespace (AHE and other
trials are invisible, so they cannot be signalled or traced); every capability dropped; the
jail dies with AHE. Without bwrap (`mode: none`, or `auto` where it does not work) the worker
is a plain child process with an empty environment: still keyless and metered by the
gateway, but NOT confined — said loudly, as the sandbox does.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ahe.confine.wire import JAIL_SOCKET_DIR, SOCKET_NAME
from ahe.sandbox import bwrap as bw

AHE_PACKAGE = Path(__file__).resolve().parents[1]  # .../ahe
JAIL_AHE_ROOT = "/opt/ahe"  # AHE's package is bound at /opt/ahe/ahe, nothing else of its checkout
JAIL_WORKSPACE = "/workspace"
JAIL_TRACE = "/trace"
TRACE_LIMIT_BYTES = 64 << 20
TMP_LIMIT_BYTES = 64 << 20
# /etc is left out on purpose: the worker needs none of it, and it holds the host's accounts.
_SYSTEM = tuple(p for p in bw.SYSTEM_PATHS if p != "/etc")


@dataclass(frozen=True)
class WorkerCommand:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    socket_path: str  # as the worker sees it
    workspace: str
    trace_dir: str


def _site_dirs() -> set[str]:
    import site

    return {os.path.realpath(p) for p in [*site.getsitepackages(), site.getusersitepackages()]}


def library_paths() -> list[str]:
    """The interpreter's import path minus AHE's own checkout and anything that is not a folder.
    An installed AHE (a wheel) sits in a site-packages folder beside its dependencies: that folder
    stays, or the worker could import none of them."""
    checkout = str(AHE_PACKAGE.parent)
    skip = {""} if os.path.realpath(checkout) in _site_dirs() else {checkout, ""}
    out = []
    for p in sys.path:
        if p in skip or not os.path.isdir(p):
            continue
        out.append(os.path.realpath(p))
    return list(dict.fromkeys(out))


def boot_args(paths: list[str], socket_path: str) -> list[str]:
    code = (f"import sys;sys.path[:0]={paths!r};"
            "from ahe.confine.worker import main;main()")
    return ["-I", "-S", "-c", code, socket_path]


def worker_env() -> dict[str, str]:
    """No variable of AHE's: the user name (for the prompt's `username`) and a bare PATH."""
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or "user"
    return {"PATH": bw.DEFAULT_PATH, "LANG": "C.UTF-8", "USER": user, "HOME": "/tmp", "TMPDIR": "/tmp",
            "PYTHONHASHSEED": "0"}


def jail_argv(bwrap: str, binds: list[tuple[str, str]], *, tmpfs: dict[str, int] | None = None,
              packages: tuple[str, ...] = ("ahe",), hostname: str = "ahe-worker") -> tuple[list[str], list[str]]:
    """bwrap's command line up to `--` for a jail that runs AHE's Python code, and the import path
    to give that Python. `binds` are read-only (host, jail) pairs; `tmpfs` private size-limited
    folders; `packages` the folders of AHE's checkout made visible (never the whole checkout)."""
    prefixes = list(dict.fromkeys(os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)))
    libs = [p for p in library_paths() if not any(p == x or p.startswith(x + os.sep) for x in prefixes)]
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--hostname", hostname]
    if os.geteuid() == 0:  # unprivileged bwrap already drops every capability
        argv += ["--cap-drop", "ALL"]
    for path in _SYSTEM:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--dev", "/dev", "--proc", "/proc"]
    # The private folders first: a library bound later under one of them (a venv in /tmp, as
    # CI's fresh venv is) must stay visible, not be covered by the tmpfs mounted over it.
    for dst, size in ({"/tmp": TMP_LIMIT_BYTES} | (tmpfs or {})).items():
        argv += ["--size", str(size), "--tmpfs", dst]
    for p in prefixes + libs:
        argv += ["--ro-bind", p, p]
    for pkg in packages:
        argv += ["--ro-bind", str(AHE_PACKAGE.parent / pkg), f"{JAIL_AHE_ROOT}/{pkg}"]
    # An installed wheel carries the bundled example tasks (their tests too) inside the package:
    # hidden under an empty folder, at /opt/ahe and wherever the interpreter's libraries show it.
    bundled = AHE_PACKAGE / "_bundled"
    if bundled.is_dir():
        shown = [f"{JAIL_AHE_ROOT}/ahe/_bundled"] if "ahe" in packages else []
        if any(str(bundled).startswith(p + os.sep) for p in prefixes + libs):
            shown.append(str(bundled))
        for target in shown:
            argv += ["--size", "4096", "--tmpfs", target]
    for src, dst in binds:
        argv += ["--ro-bind", src, dst]
    argv += ["--remount-ro", "/", "--chdir", "/tmp", "--"]
    return argv, [JAIL_AHE_ROOT] + library_paths()


def bwrap_command(bwrap: str, workspace: Path, socket_dir: Path, *, trace_limit: int = TRACE_LIMIT_BYTES) -> WorkerCommand:
    argv, paths = jail_argv(bwrap, [(str(Path(workspace).resolve()), JAIL_WORKSPACE),
                                    (str(socket_dir), JAIL_SOCKET_DIR)], tmpfs={JAIL_TRACE: trace_limit})
    sock = f"{JAIL_SOCKET_DIR}/{SOCKET_NAME}"
    argv += [os.path.realpath(sys.executable)] + boot_args(paths, sock)
    return WorkerCommand(argv=argv, env=worker_env(), cwd="/", socket_path=sock, workspace=JAIL_WORKSPACE,
                         trace_dir=JAIL_TRACE)


def plain_command(workspace: Path, socket_dir: Path, scratch: Path) -> WorkerCommand:
    """No jail: the same worker as a child process (keyless, metered, not confined)."""
    paths = [str(AHE_PACKAGE.parent)] + library_paths()
    sock = str(socket_dir / SOCKET_NAME)
    (scratch / "trace").mkdir(parents=True, exist_ok=True)
    env = worker_env() | {"HOME": str(scratch), "TMPDIR": str(scratch)}
    return WorkerCommand(argv=[sys.executable] + boot_args(paths, sock), env=env, cwd=str(scratch),
                         socket_path=sock, workspace=str(Path(workspace).resolve()),
                         trace_dir=str(scratch / "trace"))
