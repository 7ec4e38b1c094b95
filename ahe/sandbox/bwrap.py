"""Building bubblewrap command lines, and checking that bubblewrap works on this machine.

Kept apart from `local.py` so the jail's shape (what is visible, what is writable, which
namespaces) can be read in one place, and so the evolve agent's jail can reuse it.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass

from ahe.tempdirs import temp_dir

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
INSTALL_HINT = (
    "install bubblewrap (`apt-get install -y bubblewrap`) and check that `bwrap --version` "
    "runs, or pass isolation='none' to run commands with no isolation at all"
)
# The system, bound read-only: only what programs need, never the whole host `/`. /etc is not
# shown whole: `etc_args` masks what not every user of the host may read (issue 33).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# What root inside keeps: chown its files, change their modes, kill its own processes, become
# another user, bind low ports. Not CAP_DAC_OVERRIDE (read what its mode forbids), not
# CAP_MKNOD (a block device node in /tmp would read the host's disk), not CAP_SETPCAP,
# CAP_SETFCAP, CAP_SYS_CHROOT, CAP_AUDIT_WRITE: no task needs them. It can never mount,
# trace another user's processes, load modules or remount the read-only system.
ROOT_CAPS = (
    "CAP_CHOWN", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID",
    "CAP_NET_BIND_SERVICE",
)
_SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")


@dataclass(frozen=True)
class Bind:
    """A host folder made visible at `target` inside the jail."""

    source: str
    target: str
    writable: bool


def find_bwrap() -> str | None:
    return shutil.which("bwrap") or shutil.which("bwrap", path=DEFAULT_PATH)


def jail_python() -> tuple[str, list[str]]:
    """The python3 that runs the driver inside the jail, and any bind it needs.

    The system's python3 is already visible through /usr. Without one, AHE's own
    interpreter installation is bound read-only at its own path (only that folder).
    """
    for cand in _SYSTEM_PYTHONS:
        if os.access(cand, os.X_OK):
            return cand, []
    prefix = sys.base_prefix
    exe = os.path.join(prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    if not os.access(exe, os.X_OK):
        exe = os.path.realpath(sys.executable)
    return exe, ["--ro-bind", prefix, prefix]


def system_args() -> list[str]:
    """Read-only binds (or the same symlinks) for the system folders that exist here."""
    args: list[str] = []
    for path in SYSTEM_PATHS:
        if path == "/etc":
            args += etc_args()
        elif os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def etc_args() -> list[str]:
    """A /etc of the jail's own: the host's, read-only, with every entry that not every user of
    the host may read masked — such a file reads as empty, such a folder as an empty folder — so
    /etc/shadow, /etc/ssl/private or a root-only key file show nothing of theirs (issue 33).
    One bind plus a mask per private entry (a dozen on a usual host), not a bind per file: each
    mount costs the jail's start. The walk is cached while /etc itself is unchanged (a file added
    to or removed from /etc is seen by the next jail); an entry gone since the walk is skipped, or
    bwrap would fail making its mount point in the read-only /etc (what broke every jail of a
    worker once a test's planted /etc secret was removed)."""
    try:
        st = os.stat("/etc")
    except OSError:
        return []
    if os.path.islink("/etc"):
        return []
    args = ["--ro-bind", "/etc", "/etc"]
    for kind, path in _masks("/etc", st.st_mtime_ns):
        if not os.path.lexists(path):
            continue
        args += ["--tmpfs", path, "--remount-ro", path] if kind == "folder" else ["--ro-bind", "/dev/null", path]
    return args


@functools.lru_cache(maxsize=8)
def _masks(folder: str, _mtime_ns: int) -> tuple[tuple[str, str], ...]:
    """(folder | file, path) for each entry below `folder` some host user may not read: masked by an
    empty read-only tmpfs (a folder) or /dev/null (anything else; not links: they resolve inside)."""
    found: list[tuple[str, str]] = []
    for top, dirs, files in os.walk(folder):
        public_dirs = []
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(top, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            if stat.S_ISDIR(st.st_mode):
                if st.st_mode & 0o005 == 0o005:
                    public_dirs.append(name)
                else:
                    found.append(("folder", path))
            elif not (stat.S_ISREG(st.st_mode) and st.st_mode & 0o004):
                found.append(("file", path))
        dirs[:] = public_dirs
    return tuple(found)


def bwrap_argv(
    bwrap: str, binds: list[Bind], command: list[str], *, network: bool = False,
    hostname: str = "sandbox", as_pid_1: bool = False,
) -> list[str]:
    """The full bwrap command line: minimal read-only system, private /dev /proc, `binds`."""
    argv = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--hostname", hostname]
    if as_pid_1:  # the command is the jail's init: nothing inside can signal it (issue 33)
        argv.append("--as-pid-1")
    if not network:
        argv.append("--unshare-net")
    if os.geteuid() == 0:  # unprivileged bwrap already drops every capability
        argv += ["--cap-drop", "ALL"]
        for cap in ROOT_CAPS:
            argv += ["--cap-add", cap]
    argv += system_args()
    argv += ["--dev", "/dev", "--proc", "/proc", "--symlink", "/tmp", "/var/tmp"]
    _, python_binds = jail_python()
    argv += python_binds
    for b in binds:
        argv += ["--bind" if b.writable else "--ro-bind", b.source, b.target]
    argv += ["--remount-ro", "/", "--chdir", "/", "--"]
    return argv + command


def init_pidfd(bwrap_pid: int) -> int | None:
    """A pidfd on bwrap's init, pid 1 of the jail. bwrap returns as soon as its command (the
    driver) exits; the init exits only once every process of the jail's pid namespace is
    gone, so waiting for it makes "stopped" mean "nothing of the sandbox runs any more"."""
    try:
        with open(f"/proc/{bwrap_pid}/task/{bwrap_pid}/children") as f:
            kids = f.read().split()
        return os.pidfd_open(int(kids[0])) if len(kids) == 1 else None
    except (OSError, ValueError, AttributeError):
        return None


@functools.lru_cache(maxsize=1)
def check() -> tuple[bool, str]:
    """Whether a jail shaped like the real one starts and runs python3 (cached per process)."""
    bwrap = find_bwrap()
    if bwrap is None:
        return False, f"bubblewrap (bwrap) is not installed; {INSTALL_HINT}"
    python, _ = jail_python()
    with temp_dir("bwrap-check") as tmp:  # named with our pid: swept if we are killed mid-check
        argv = bwrap_argv(bwrap, [Bind(str(tmp), "/tmp", True)], [python, "-I", "-S", "-c", "pass"])
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                                  env={"PATH": DEFAULT_PATH})
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"bubblewrap at {bwrap} could not run ({e}); {INSTALL_HINT}"
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return False, f"bubblewrap at {bwrap} fails its self-check ({why}); {INSTALL_HINT}"
    version = subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip()
    return True, f"{version or 'bubblewrap'} at {bwrap} works (python3 inside: {python})"
