"""The driver: one small process living inside a local sandbox for the whole trial.

`LocalSandbox` starts it once (inside bwrap, or as a plain subprocess in fallback mode) and
then talks to it over its stdin/stdout, one JSON object per line, so each command costs a
fork+exec instead of a new jail. It must run on any Python >= 3.8 with the standard library
only: inside the jail it is executed by the *system's* python3, not by AHE's interpreter, and
it is sent over stdin (not bound as a file) so the agent never sees it on disk.

Requests carry an `id`; replies echo it and may come back in any order (a command is started
by the reading thread and then waited for in its own thread, a file operation runs in its
own thread: parallel tool calls do not queue). Operations:

  exec   argv, cwd, env, out, err, timeout, background -> exit_code, timed_out
  read   path, tar -> data (base64; a tar archive of a folder when `tar`), kind, mode
  write  path, data, kind ("file" | "tar"), mode -> ok
  cancel target (the id of a running exec) -> no answer; the command is killed
  killall                -> killed (how many); every process but the driver is gone
A failed file operation answers `errno` and `error`.

Inside bwrap the driver is the jail's pid 1 (`--as-pid-1`) and not dumpable: the kernel drops
every signal a process of the jail sends it and refuses to let them trace it, `killall` is
kill(-1) (every process of the pid namespace), and when it exits the kernel kills the rest.
Each command's output goes to the agent's /logs/exec (to page through) and, once it ends, is
copied into AHE's own record folder, reached only through a folder descriptor the driver
inherited (AHE_RECORD_FD): nothing the agent runs can rewrite AHE's record. End of stdin means shutdown: every
session the driver started is killed (what a pid namespace would do anyway; in fallback mode
it is the only cleanup there is).
"""

import base64
import errno as errno_mod
import fcntl
import io
import itertools
import json
import os
import select
import signal
import stat
import subprocess
import sys
import tarfile
import threading

_write_lock = threading.Lock()
_sessions = set()  # pids of session leaders we started (their sid == pgid == pid)
_sessions_lock = threading.Lock()
_running = {}  # request id -> pid of a foreground command, for `cancel`
_cancelled = set()  # ids cancelled before their command was even spawned
_spares = {}  # output folder -> hidden empty files made ahead for the next commands
_spares_lock = threading.Lock()
_spare_numbers = itertools.count(1)
_making = threading.Lock()  # held while spares are being made
_closing = False  # set at shutdown: make no more spares
_INIT = os.environ.get("AHE_DRIVER_INIT") == "1"  # pid 1 of the jail's own pid namespace
_RECORD_FD = int(os.environ["AHE_RECORD_FD"]) if os.environ.get("AHE_RECORD_FD") else None
_own = set()  # pids of the commands we started (Popen reaps them); the rest we reap
_spawn_lock = threading.Lock()
_background = []  # (out fd, err fd, out path, err path) of background commands, re-recorded at the end
_background_lock = threading.Lock()


def reply(obj, req=None):
    """Answer on the channel the request came from: AHE's stdin/stdout, or a direct connection."""
    send = req.get("_send") if req is not None else None
    if send is not None:
        send(obj)
        return
    data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
    with _write_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def read_output(path, limit):
    """A command's output as text, head and tail beyond `limit` bytes (the host's read_output
    in ahe/sandbox/local_files.py, for a direct exec that asks for its output inline): from
    AHE's record of it when there is one."""
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        if _RECORD_FD is not None:
            fd = os.open(os.path.basename(path), flags, dir_fd=_RECORD_FD)
        else:
            fd = os.open(path, flags)
    except FileNotFoundError:
        return ""
    except OSError as e:
        return "[ahe: cannot read %s: %s]" % (path, e.strerror)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "[ahe: %s is not a regular file; output not read]" % path
        if st.st_size <= limit:
            data = f.read()
        else:
            half = limit // 2
            head = f.read(half)
            f.seek(st.st_size - half)
            note = "\n[... %d bytes omitted; full output in %s ...]\n" % (st.st_size - 2 * half, path)
            data = head + note.encode() + f.read(half)
    return data.decode("utf-8", "replace")


def exec_reply(req, rc, timed_out):
    out = {"id": req["id"], "exit_code": rc, "timed_out": timed_out}
    limit = req.get("inline")
    if limit and not req.get("background"):
        out["stdout"], out["stderr"] = read_output(req["out"], limit), read_output(req["err"], limit)
    reply(out, req)


def record(src_fd, path):
    """Copy what the command wrote (through the fd it was given, whatever now lies at its path)
    into AHE's record folder under the same name."""
    if _RECORD_FD is None:
        return
    name = os.path.basename(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    dst = os.open(name, flags, 0o644, dir_fd=_RECORD_FD)
    try:
        offset, size = 0, os.fstat(src_fd).st_size
        while offset < size:
            sent = os.sendfile(dst, src_fd, offset, size - offset)
            if sent <= 0:
                break
            offset += sent
    finally:
        os.close(dst)


def _record_pair(fds, req):
    for fd, path in ((fds[0], req["out"]), (fds[1], req["err"])):
        try:
            record(fd, path)
        except OSError:
            pass


def _close_pair(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _ensure_dir(path):
    """Put back a real output folder if the agent removed it or swapped it for a link."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            return
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.makedirs(path, exist_ok=True)


def _open_output(path):
    """Create an output file afresh, never following a symlink someone planted there."""
    _ensure_dir(os.path.dirname(path))
    fd = _take_spare(path)
    if fd is not None:
        return fd
    flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno != errno_mod.ELOOP:
            raise
    os.unlink(path)
    return os.open(path, flags, 0o644)


def _take_spare(path):
    """An empty file made ahead in the same folder, renamed to `path` (an open fd), or None.

    Creating a file costs 0.1-2 ms on a busy ext4 (its inode allocator scans for recently
    deleted inodes); a rename costs ~25 us. So the driver makes the next command's two files
    while this one runs (see _finish) under hidden names, and renames them here.
    Anything odd about a spare (a link, not a plain file, linked twice) means: make one afresh.
    """
    folder = os.path.dirname(path)
    with _spares_lock:
        names = _spares.get(folder)
        spare = names.pop() if names else None
    if spare is None:
        return None
    try:
        fd = os.open(spare, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise OSError(errno_mod.EINVAL, "not a spare")
        os.ftruncate(fd, 0)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        os.rename(spare, path)  # replaces a planted link itself, never what it points to
    except OSError:
        os.close(fd)
        return None
    return fd


def make_spares(folder, want=2):
    """Beside a command: make hidden empty files in its output folder for the next one."""
    with _making:  # shutdown waits for this, so no spare is made after it cleaned up
        if _closing:
            return
        with _spares_lock:
            missing = want - len(_spares.get(folder, ()))
        for _ in range(missing):
            name = os.path.join(folder, ".spare-%d" % next(_spare_numbers))
            try:
                os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                 | os.O_CLOEXEC, 0o644))
            except OSError:
                return  # the folder went away or is full: commands create their files as before
            with _spares_lock:
                _spares.setdefault(folder, []).append(name)


def _remove_spares():
    """At shutdown: no spare made ahead is left in the trial's /logs/exec."""
    global _closing
    with _making:
        _closing = True
    with _spares_lock:
        names = [n for folder in _spares.values() for n in folder]
        _spares.clear()
    for name in names:
        try:
            if stat.S_ISREG(os.lstat(name).st_mode):
                os.unlink(name)
        except OSError:
            pass


def _proc_table():
    """pid -> (ppid, pgid, sid) for every visible live process (zombies need no killing)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rfind(b")") + 2 :].split()
        if fields[0] != b"Z":
            table[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return table


def kill_session(leader):
    """Kill a command's process group, its session and every descendant still linked to it."""
    for _ in range(5):
        table = _proc_table()
        victims = {p for p, (_, pgid, sid) in table.items() if pgid == leader or sid == leader}
        if leader in table:
            victims.add(leader)
        children = {}
        for p, (ppid, _, _) in table.items():
            children.setdefault(ppid, []).append(p)
        stack = list(victims)
        while stack:
            for c in children.get(stack.pop(), ()):
                if c not in victims:
                    victims.add(c)
                    stack.append(c)
        victims.discard(os.getpid())
        try:
            os.killpg(leader, signal.SIGKILL)
        except OSError:
            pass
        for p in victims:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        if not victims:
            return


def _forget_if_gone(leader):
    try:
        os.killpg(leader, 0)
    except OSError:
        with _sessions_lock:
            _sessions.discard(leader)


def _wait(proc, timeout):
    """Popen.wait(timeout) polls with sleeps (milliseconds of latency per command); a pidfd
    wakes us the instant the command exits. Falls back to polling where pidfds are missing."""
    if timeout is None:
        return proc.wait()
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return proc.wait(timeout)
    try:
        poller = select.poll()  # not select(): fds may exceed FD_SETSIZE under load
        poller.register(fd, select.POLLIN)
        if not poller.poll(max(0, int(timeout * 1000))):
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    return proc.wait()


def _exit_code(rc):
    return 128 - rc if rc < 0 else rc


def do_exec(req):
    """Start the command in the calling (main) thread, then wait for it in a new thread: the
    thread starts while the command already runs, off its critical path."""
    proc = _spawn(req)
    if proc is not None:
        threading.Thread(target=_guarded, args=(_finish, req, proc), daemon=True).start()


def _spawn(req):
    """Open the output files and start `argv` in a new session; None when already answered.
    The command keeps its output fds in `req["_fds"]` until its output is recorded."""
    rid = req["id"]
    out = _open_output(req["out"])
    try:
        err = _open_output(req["err"])
    except BaseException:
        os.close(out)
        raise
    proc = problem = None
    try:
        cwd = req["cwd"]
        if not os.path.isdir(cwd):
            problem, code = "bash: cd: %s: No such file or directory\n" % cwd, 1
        else:
            try:
                with _spawn_lock:
                    proc = subprocess.Popen(
                        req["argv"], cwd=cwd, env=req["env"], stdin=subprocess.DEVNULL,
                        stdout=out, stderr=err, start_new_session=True,
                    )
                    _own.add(proc.pid)
            except OSError as e:
                problem, code = "ahe sandbox: cannot run %s: %s\n" % (req["argv"][0], e), 127
        if problem is not None:
            os.write(err, problem.encode())
            _record_pair((out, err), req)
    finally:
        if proc is None:
            _close_pair((out, err))
    if proc is None:
        exec_reply(req, code, False)
        return None
    req["_fds"] = (out, err)
    with _sessions_lock:
        _sessions.add(proc.pid)
        if not req.get("background") and rid not in _cancelled:
            _running[rid] = proc.pid
    return proc


def _finish(req, proc):
    """Make the next command's files while this one runs, then wait for it (up to its timeout),
    record its output and answer. Not after answering: the process woken by the answer is
    usually put on this CPU (a synchronous wake-up), and would wait there for the files."""
    rid, fds = req["id"], req.pop("_fds")
    with _sessions_lock:
        cancelled_early = rid in _cancelled
    if cancelled_early:
        kill_session(proc.pid)
        _reaped(proc)
        _record_pair(fds, req)
        _close_pair(fds)
        return
    if req.get("background"):
        exec_reply(req, 0, False)
        make_spares(os.path.dirname(req["out"]))
        _reaped(proc)  # its children keep running in the session
        _record_pair(fds, req)
        with _background_lock:  # recorded again when the agent's processes end (killall)
            _background.append((fds, req))
        _forget_if_gone(proc.pid)
        return
    make_spares(os.path.dirname(req["out"]))
    try:
        rc = _exit_code(_wait(proc, req.get("timeout")))
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_session(proc.pid)
        _reaped(proc)
        rc, timed_out = 124, True
    with _spawn_lock:
        _own.discard(proc.pid)
    _record_pair(fds, req)
    _close_pair(fds)
    with _sessions_lock:
        cancelled = _running.pop(rid, None) is None
    if cancelled:
        return  # the caller gave up on this command; nobody waits for the answer
    _forget_if_gone(proc.pid)
    exec_reply(req, rc, timed_out)


def _reaped(proc):
    proc.wait()
    with _spawn_lock:
        _own.discard(proc.pid)


def do_killall(req):
    """End every process the sandbox runs but the driver: the agent's phase is over (issue 33).

    As the jail's pid 1, kill(-1) reaches every process of the pid namespace, whatever session,
    group or parent it has; repeated until /proc shows none alive (a fork racing a kill). In the
    no-isolation fallback, every session the driver started and every descendant of the driver
    (it is their subreaper, so double-forked orphans are still its descendants)."""
    killed = 0
    for _ in range(400):
        table = _proc_table()
        me = os.getpid()
        if _INIT:
            alive = [p for p in table if p != me]
        else:
            alive = list(_descendants(table, me))
        if not alive:
            break
        killed = max(killed, len(alive))
        if _INIT:
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        else:
            for p in alive:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        _sleep(0.005)
    else:
        raise OSError(errno_mod.EBUSY, "processes of the sandbox kept appearing faster than they were killed")
    with _sessions_lock:
        _sessions.clear()
    with _background_lock:
        done, _background[:] = list(_background), []
    for fds, breq in done:
        _record_pair(fds, breq)
        _close_pair(fds)
    reply({"id": req["id"], "killed": killed}, req)


def _descendants(table, root):
    children = {}
    for p, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(p)
    seen, stack = set(), [root]
    while stack:
        for c in children.get(stack.pop(), ()):
            if c not in seen:
                seen.add(c)
                stack.append(c)
    return seen


def _sleep(sec):
    select.select([], [], [], sec)


def reap_orphans():
    """The jail's init (or the fallback's subreaper) inherits every orphan: reap the ones that
    are not our own commands' (subprocess reaps those), so no zombie piles up."""
    me = os.getpid()
    while True:
        _sleep(0.25)
        try:
            names = os.listdir("/proc")
        except OSError:
            continue
        for name in names:
            if not name.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    raw = f.read()
            except OSError:
                continue
            fields = raw[raw.rfind(b")") + 2 :].split()
            if fields[0] != b"Z" or int(fields[1]) != me:
                continue
            pid = int(name)
            with _spawn_lock:
                if pid in _own:
                    continue
                try:
                    os.waitpid(pid, os.WNOHANG)
                except OSError:
                    pass


def harden():
    """Before any command runs: nothing of the jail may trace the driver or read its memory
    (PR_SET_DUMPABLE 0: same-uid ptrace needs CAP_SYS_PTRACE, which the jail has not); as pid 1,
    every signal left at its default is dropped by the kernel when a jail process sends it; in
    the fallback, orphans of the driver's commands stay its descendants (a child subreaper)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
        if not _INIT:
            libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:
        if _INIT:
            raise
    if _INIT:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                    signal.SIGUSR2, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
    if _RECORD_FD is not None:
        fcntl.fcntl(_RECORD_FD, fcntl.F_SETFD, fcntl.FD_CLOEXEC)


def do_cancel(req):
    """The caller stopped waiting for a command (cancelled task): kill it like a timeout."""
    with _sessions_lock:
        pid = _running.pop(req["target"], None)
        if pid is None:
            _cancelled.add(req["target"])
    if pid is not None:
        kill_session(pid)


def do_read(req):
    path = req["path"]
    if os.path.isdir(path) and not req.get("tar"):
        raise OSError(errno_mod.EISDIR, "is a directory", path)
    if os.path.isdir(path):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(path, arcname=".")
        data, kind = buf.getvalue(), "dir"
    else:  # O_NONBLOCK: opening a FIFO must not hang the driver
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno_mod.EINVAL, "not a regular file", path)
            data, kind = f.read(), "file"
    mode = stat.S_IMODE(os.stat(path).st_mode)
    reply({"id": req["id"], "data": base64.b64encode(data).decode(), "kind": kind,
           "mode": mode}, req)


def do_write(req):
    path, data = req["path"], base64.b64decode(req["data"])
    if req.get("kind") == "tar":
        os.makedirs(path, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            if hasattr(tarfile, "fully_trusted_filter"):  # our own archive, made by AHE
                tar.extractall(path, filter="fully_trusted")
            else:
                tar.extractall(path)
    else:
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
            if req.get("mode") is not None:
                os.fchmod(f.fileno(), req["mode"])
    reply({"id": req["id"], "ok": True}, req)


_OPS = {"exec": do_exec, "read": do_read, "write": do_write, "cancel": do_cancel, "killall": do_killall}


def handle(req):
    _guarded(_OPS[req["op"]], req)


def _guarded(fn, req, *args):
    try:
        fn(req, *args)
    except OSError as e:
        reply({"id": req["id"], "errno": e.errno or 0, "error": e.strerror or str(e)}, req)
    except Exception as e:  # a driver bug must answer, not hang the caller
        reply({"id": req["id"], "errno": 0, "error": "%s: %s" % (type(e).__name__, e)}, req)


def shutdown():
    with _sessions_lock:
        leaders = list(_sessions)
    for leader in leaders:
        kill_session(leader)
    if not _INIT:  # as pid 1 our exit kills the namespace; here, the orphans we adopted
        for p in _descendants(_proc_table(), os.getpid()):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
    with _background_lock:
        for fds, breq in _background:
            _record_pair(fds, breq)
    _remove_spares()
    try:
        sys.stdout.flush()
    finally:
        os._exit(0)


_connections = itertools.count(1)


def serve_direct(fd):
    """Accept direct connections on the listening socket AHE handed us (fd `fd`): the confined
    worker's own channel for commands (ahe/confine/direct.py), so a command costs no hop through
    AHE's process. Requests and answers are the same as on stdin/stdout; a connection's ids are
    its own (kept apart from AHE's and other connections' by a prefix)."""
    import socket

    listener = socket.socket(fileno=fd)
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_serve_connection, args=(conn, next(_connections)), daemon=True).start()


def _serve_connection(conn, n):
    lock, prefix = threading.Lock(), "%d:" % n

    def send(obj):
        obj = dict(obj)
        obj["id"] = obj["id"][len(prefix):] if isinstance(obj.get("id"), str) else obj.get("id")
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        with lock:
            try:
                conn.sendall(data)
            except OSError:
                pass  # the worker went away; its commands are killed with the sandbox

    reader = conn.makefile("rb")
    for line in reader:
        try:
            req = json.loads(line)
        except ValueError:
            break
        if not isinstance(req, dict) or req.get("op") not in _OPS:
            break
        req["id"] = prefix + str(req.get("id"))
        if "target" in req:
            req["target"] = prefix + str(req["target"])
        req["_send"] = send
        if req["op"] == "exec":
            handle(req)
        else:
            threading.Thread(target=handle, args=(req,), daemon=True).start()
    conn.close()
    with _sessions_lock:  # nobody waits for these any more: killed, as a cancelled call's are
        mine = [rid for rid in _running if isinstance(rid, str) and rid.startswith(prefix)]
    for rid in mine:
        do_cancel({"target": rid})


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    harden()
    threading.Thread(target=reap_orphans, daemon=True).start()
    fd = os.environ.get("AHE_DRIVER_FD")
    if fd:
        threading.Thread(target=serve_direct, args=(int(fd),), daemon=True).start()
    reply({"ready": True, "pid": os.getpid()})
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            shutdown()
        if not line.strip():
            continue
        req = json.loads(line)
        if req.get("op") == "exec":  # spawned right here: no thread hop before the command
            handle(req)
        else:
            threading.Thread(target=handle, args=(req,), daemon=True).start()


if __name__ == "__main__":
    main()
