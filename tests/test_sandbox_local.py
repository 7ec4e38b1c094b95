"""LocalSandbox against real bubblewrap: isolation, persistence, timeouts, cleanup.

Processes are told apart on the host by a unique `sleep N` they run (N is random per test),
so tests running in parallel under xdist never see each other's processes.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import socket
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from ahe.sandbox import Mount, Sandbox, SandboxError
from ahe.sandbox.local import LocalSandbox, SandboxPathError
from tests.conftest import remove_temp_folders_of

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(shutil.which("bwrap") is None,
                       reason="bubblewrap (bwrap) is not installed on this machine"),
]


def marker() -> int:
    return random.randint(10**8, 10**9)


def host_pids(n: int) -> list[int]:
    """Host pids of processes running `sleep n`."""
    found = []
    needle = f"sleep\0{n}".encode()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if needle in f.read():
                        found.append(int(name))
            except OSError:
                pass
    return found


def wait_alive(n: int, within: float = 5.0) -> bool:
    """A command that returned may not have exec'd its background `sleep` yet: poll."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if host_pids(n):
            return True
        time.sleep(0.01)
    return False


def wait_gone(n: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not host_pids(n):
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
async def sb(tmp_path: Path):
    box = LocalSandbox(tmp_path / "app", root_dir=tmp_path / "root", isolation="bwrap")
    await box.start()
    yield box
    await box.stop()


def test_available_reports_working_bwrap() -> None:
    ok, why = LocalSandbox.available()
    assert ok, why
    assert "bwrap" in why


async def test_is_a_sandbox_and_isolated(sb: LocalSandbox) -> None:
    assert isinstance(sb, Sandbox)
    assert sb.isolated


async def test_exec_exit_codes_output_and_paths(sb: LocalSandbox) -> None:
    r = await sb.exec("echo out; echo err >&2; exit 3", timeout=10)
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out) == (3, "out\n", "err\n", False)
    assert r.stdout_path.startswith("/logs/exec/") and r.stdout_path.endswith(".stdout")
    assert r.stderr_path == r.stdout_path.replace(".stdout", ".stderr")
    assert await sb.read_file(r.stdout_path) == b"out\n"
    host_file = sb.root_dir / r.stdout_path.removeprefix("/")
    assert host_file.read_text() == "out\n"
    assert (await sb.exec("kill -9 $$", timeout=10)).exit_code == 137
    assert (await sb.exec("printf 'a\\377b'", timeout=10)).stdout == "a\ufffdb"
    second = await sb.exec("true", timeout=10)
    assert second.stdout_path != r.stdout_path


async def test_exec_cwd_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    box = LocalSandbox(tmp_path / "app", isolation="bwrap", env={"FROM_CTOR": "c"})
    async with box:
        assert (await box.exec("pwd", timeout=10)).stdout == "/app\n"
        assert (await box.exec("pwd", timeout=10, cwd="/tmp")).stdout == "/tmp\n"
        await box.exec("mkdir -p sub", timeout=10)
        assert (await box.exec("pwd", timeout=10, cwd="sub")).stdout == "/app/sub\n"
        r = await box.exec("pwd", timeout=10, cwd="/nope")
        assert r.exit_code != 0 and "/nope" in r.stderr
        r = await box.exec("echo $FROM_CTOR $ONE $HOME $TMPDIR; echo $PATH", timeout=10,
                           env={"ONE": "1"})
        first, path = r.stdout.splitlines()
        assert first == "c 1 /root /tmp"
        assert "/usr/bin" in path.split(":")
        assert "sk-must-not-leak" not in (await box.exec("env", timeout=10)).stdout
        r = await box.exec("touch ~/.gitconfig && git config --global user.name x && "
                           "git config --global user.name", timeout=10)
        assert r.stdout == "x\n", r.stderr


async def test_tools_work_inside(sb: LocalSandbox) -> None:
    r = await sb.exec(
        "set -e; python3 -c 'print(6*7)'; sqlite3 :memory: 'select 40+2'; "
        "cd /app && git init -q r && cd r && git config user.email a@b && git config user.name a"
        " && echo x > f && git add f && git commit -qm m && git log --oneline | wc -l; "
        "ls /usr/bin | wc -l > /dev/null; sort <<< $'b\\na' | head -1",
        timeout=30)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.split() == ["42", "42", "1", "a"]


async def test_state_and_background_process_persist(sb: LocalSandbox) -> None:
    await sb.exec("export GONE=1; echo kept > /tmp/state; cd /tmp", timeout=10)
    r = await sb.exec("cat /tmp/state; echo ${GONE:-unset}; pwd", timeout=10)
    assert r.stdout == "kept\nunset\n/app\n"  # files persist; shell state is per command
    n = marker()
    await sb.exec(f"nohup sleep {n} > /dev/null 2>&1 &", timeout=10)
    r = await sb.exec(
        "nohup python3 -m http.server 8765 --bind 127.0.0.1 > /tmp/http.log 2>&1 & "
        "(while true; do date +%s%N >> /tmp/ticks; sleep 0.05; done) > /dev/null 2>&1 &",
        timeout=10)
    assert r.exit_code == 0
    assert wait_alive(n), "the background sleep should run on after its exec returned"
    fetch = ("for i in $(seq 100); do python3 -c \"import urllib.request as u; "
             "print(u.urlopen('http://127.0.0.1:8765/').status)\" 2>/dev/null && break; "
             "sleep 0.05; done")
    assert (await sb.exec(fetch, timeout=20)).stdout.strip() == "200"
    before = int((await sb.exec("wc -l < /tmp/ticks", timeout=10)).stdout)
    await asyncio.sleep(0.3)
    after = int((await sb.exec("wc -l < /tmp/ticks", timeout=10)).stdout)
    assert after > before, "the background loop should keep running between exec calls"
    assert str(n) in (await sb.exec("ps -eo args", timeout=10)).stdout


async def test_background_flag_returns_at_once(sb: LocalSandbox) -> None:
    n = marker()
    t0 = time.monotonic()
    r = await sb.exec(f"echo started; sleep {n}", timeout=5, background=True)
    assert time.monotonic() - t0 < 2
    assert (r.exit_code, r.background, r.stdout) == (0, True, "")
    assert r.stdout_path and r.stdout_path.startswith("/logs/exec/")
    for _ in range(100):
        if (await sb.read_file(r.stdout_path)) == b"started\n":
            break
        await asyncio.sleep(0.02)
    assert (await sb.read_file(r.stdout_path)) == b"started\n"
    await asyncio.sleep(0.1)
    assert wait_alive(n), "a background command outlives the timeout of its exec"


async def test_timeout_kills_the_whole_group(sb: LocalSandbox) -> None:
    a, b, c = marker(), marker(), marker()
    t0 = time.monotonic()
    r = await sb.exec(
        f"sleep {a} & python3 -c 'import subprocess; subprocess.run([\"sleep\", \"{b}\"])' & "
        f"setsid sleep {c} & echo begun; wait", timeout=1)
    assert time.monotonic() - t0 < 5
    assert (r.exit_code, r.timed_out) == (124, True)
    assert r.stdout == "begun\n"
    for n in (a, b, c):
        assert wait_gone(n), f"sleep {n} survived the timeout"
    assert (await sb.exec("echo alive", timeout=10)).stdout == "alive\n"


async def test_cancelled_exec_is_killed(sb: LocalSandbox) -> None:
    n = marker()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(sb.exec(f"sleep {n}", timeout=60), 0.5)
    assert wait_gone(n)


async def test_concurrent_execs_on_one_sandbox(sb: LocalSandbox) -> None:
    t0 = time.monotonic()
    results = await asyncio.gather(
        *(sb.exec(f"sleep 0.5; echo {i}; echo e{i} >&2", timeout=20) for i in range(12)))
    assert time.monotonic() - t0 < 4  # one after the other would take 6 s
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(12)]
    assert [r.stderr for r in results] == [f"e{i}\n" for i in range(12)]
    assert len({r.stdout_path for r in results}) == 12


async def test_no_network_unless_asked(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    probe = (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), "
             "timeout=3); print('connected')\"")
    try:
        async with LocalSandbox(tmp_path / "a", isolation="bwrap") as closed:
            r = await closed.exec(probe, timeout=20)
            assert r.exit_code != 0 and "connected" not in r.stdout
            r = await closed.exec("cat /sys/class/net/*/operstate 2>/dev/null; ls /sys 2>&1;"
                                  " python3 -c \"import socket; print(socket.if_nameindex())\"",
                                  timeout=10)
            assert "'lo'" in r.stdout and "eth" not in r.stdout
        async with LocalSandbox(tmp_path / "b", isolation="bwrap", network=True) as opened:
            r = await opened.exec(probe, timeout=20)
            assert r.stdout == "connected\n", r.stderr
    finally:
        listener.close()


async def test_host_folders_are_hidden(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    tests = tmp_path / "task" / "tests"
    tests.mkdir(parents=True)
    (tests / "test.sh").write_text("echo answer")
    async with LocalSandbox(tmp_path / "app", isolation="bwrap") as box:
        for path in (secret, tests / "test.sh", "/work", "/root/.pyenv", "/home", "/opt",
                     "/var/lib", "/mnt", str(Path(sys.executable).parent)):
            r = await box.exec(f"test -e {path} && echo visible || echo hidden", timeout=10)
            assert r.stdout == "hidden\n", f"{path} is visible inside the sandbox"
        r = await box.exec("ls -A /", timeout=10)
        assert set(r.stdout.split()) <= {"app", "bin", "dev", "etc", "lib", "lib32", "lib64",
                                         "libx32", "logs", "proc", "root", "sbin", "tmp",
                                         "usr", "var"}
        assert (await box.exec("ls -A /root", timeout=10)).stdout == ""
        r = await box.exec("ps -e --no-headers | wc -l", timeout=10)
        assert int(r.stdout) < 10, "the sandbox should have its own pid namespace"


async def test_system_is_read_only(sb: LocalSandbox) -> None:
    for path in ("/usr/bin/evil", "/etc/evil", "/evil", "/bin/evil", "/var/evil"):
        r = await sb.exec(f"touch {path}", timeout=10)
        assert r.exit_code != 0, f"could write {path}"
        assert not Path(path).exists()
    r = await sb.exec("mount -o remount,rw /usr 2>&1; echo $?", timeout=10)
    assert r.stdout.strip().splitlines()[-1] != "0"
    with pytest.raises(SandboxPathError, match="read-only"):
        await sb.write_file("/usr/evil", b"x")
    r = await sb.exec("echo ok > /var/tmp/x && cat /tmp/x && echo hi > /dev/shm/y", timeout=10)
    assert r.stdout == "ok\n", r.stderr


async def test_app_writes_land_in_app_dir_and_tmp_is_private(tmp_path: Path) -> None:
    one = LocalSandbox(tmp_path / "app1", isolation="bwrap")
    two = LocalSandbox(tmp_path / "app2", isolation="bwrap")
    async with one, two:
        await one.exec("echo hello > /app/made.txt; echo one > /tmp/who", timeout=10)
        assert (tmp_path / "app1" / "made.txt").read_text() == "hello\n"
        (tmp_path / "app1" / "from_host.txt").write_text("host")
        assert (await one.exec("cat /app/from_host.txt", timeout=10)).stdout == "host"
        r = await two.exec("cat /tmp/who 2>&1 || echo missing", timeout=10)
        assert r.stdout.strip().endswith("missing")
        assert (await one.exec("cat /tmp/who", timeout=10)).stdout == "one\n"
        assert not Path("/tmp/who").exists() or Path("/tmp/who").read_text() != "one\n"


async def test_read_write_upload_download(sb: LocalSandbox, tmp_path: Path) -> None:
    await sb.write_file("/app/a/b.bin", b"\x00\xffdata")
    assert (sb.app_dir / "a" / "b.bin").read_bytes() == b"\x00\xffdata"
    assert await sb.read_file("a/b.bin") == b"\x00\xffdata"  # relative to /app
    await sb.write_file("/tmp/t.txt", b"tmp")
    assert (await sb.exec("cat /tmp/t.txt", timeout=10)).stdout == "tmp"
    assert (await sb.read_file("/etc/os-release")) == Path("/etc/os-release").read_bytes()
    await sb.write_file("/dev/shm/x", b"via the jail")  # not a bind: written by the driver
    assert await sb.read_file("/dev/shm/x") == b"via the jail"
    with pytest.raises(FileNotFoundError):
        await sb.read_file("/app/nope")
    with pytest.raises(FileNotFoundError):
        await sb.read_file("/nope/x")
    with pytest.raises(IsADirectoryError):
        await sb.read_file("/app")
    with pytest.raises(IsADirectoryError):
        await sb.read_file("/etc")
    await sb.exec("mkfifo /app/fifo /dev/shm/fifo", timeout=10)
    for fifo in ("/app/fifo", "/dev/shm/fifo"):  # must fail at once, not wait for a writer
        with pytest.raises(OSError, match="not a regular file"):
            await asyncio.wait_for(sb.read_file(fifo), 5)
    for bad in ("/app/../etc/passwd", "../x", "/tmp/a/../../root"):
        with pytest.raises(SandboxPathError, match=r"\.\."):
            await sb.read_file(bad)
        with pytest.raises(SandboxPathError):
            await sb.write_file(bad, b"x")

    src = tmp_path / "src"
    (src / "deep").mkdir(parents=True)
    (src / "top.txt").write_text("top")
    (src / "deep" / "d.txt").write_text("deep")
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    await sb.upload(src, "/app/proj")
    r = await sb.exec("cat proj/top.txt proj/deep/d.txt; ./proj/run.sh", timeout=10)
    assert r.stdout == "topdeepran\n"
    await sb.upload(src / "top.txt", "/tmp/up/one.txt")
    assert (await sb.exec("cat /tmp/up/one.txt", timeout=10)).stdout == "top"
    for where in ("/app/bin/run.sh", "/dev/shm/run.sh"):  # host copy, and through the jail
        await sb.upload(src / "run.sh", where)
        assert (await sb.exec(where, timeout=10)).stdout == "ran\n", "mode is kept"
        await sb.download(where, tmp_path / "back" / where.replace("/", "_"))
        assert os.access(tmp_path / "back" / where.replace("/", "_"), os.X_OK)
    await sb.upload(src, "/dev/shm/tree")  # outside the binds: a tar through the jail
    assert (await sb.exec("cat /dev/shm/tree/deep/d.txt", timeout=10)).stdout == "deep"
    with pytest.raises(SandboxPathError, match="read-only"):
        await sb.upload(src, "/usr/local/tree")

    await sb.exec("mkdir -p /tmp/out/x && echo 1 > /tmp/out/x/1 && echo 2 > /tmp/out/2",
                  timeout=10)
    await sb.download("/tmp/out", tmp_path / "got")
    assert (tmp_path / "got" / "x" / "1").read_text() == "1\n"
    assert (tmp_path / "got" / "2").read_text() == "2\n"
    await sb.download("/tmp/out/2", tmp_path / "single" / "two.txt")
    assert (tmp_path / "single" / "two.txt").read_text() == "2\n"
    await sb.download("/etc/os-release", tmp_path / "os-release")
    assert (tmp_path / "os-release").read_bytes() == Path("/etc/os-release").read_bytes()
    await sb.download("/dev/shm/tree", tmp_path / "tree")
    assert (tmp_path / "tree" / "deep" / "d.txt").read_text() == "deep"


async def test_planted_symlinks_do_not_reach_the_host(sb: LocalSandbox, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    await sb.exec(f"ln -s {secret} /app/leak; ln -s {tmp_path} /app/dir; "
                  f"ln -s {secret} /logs/leak", timeout=10)
    for path in ("/app/leak", "/app/dir/secret.txt", "/logs/leak"):
        with pytest.raises(FileNotFoundError):
            await sb.read_file(path)
    with pytest.raises(OSError):  # in the jail's view /app/dir is a dangling link
        await sb.write_file("/app/dir/secret.txt", b"overwritten")
    await sb.download("/app", tmp_path / "copy")
    assert os.path.islink(tmp_path / "copy" / "leak")  # copied as a link, not followed
    assert secret.read_text() == "host secret"
    # An output file swapped for a link to a host path is not followed: the output is AHE's
    # record of what the command wrote (issue 33), whatever lies at its path afterwards.
    r = await sb.exec(f"echo x; ln -sf {secret} $(ls /logs/exec/*.stdout | tail -1)",
                      timeout=10)
    assert r.stdout == "x\n"
    r = await sb.exec(f"echo y; rm -rf /logs/exec && ln -s {tmp_path} /logs/exec", timeout=10)
    assert r.stdout == "y\n"
    following = f"{int(Path(r.stdout_path).stem) + 1:04d}.stdout"
    (tmp_path / following).write_text("host secret")
    r = await sb.exec("echo after", timeout=10)  # the driver puts a real folder back
    assert r.stdout == "after\n" and r.stdout_path == f"/logs/exec/{following}"
    assert (tmp_path / following).read_text() == "host secret"


async def test_mounts_read_only_and_writable(tmp_path: Path) -> None:
    ro, rw = tmp_path / "exp", tmp_path / "ws"
    ro.mkdir()
    rw.mkdir()
    (ro / "report.md").write_text("report")
    mounts = [Mount(source=ro, target="/experiment"), Mount(source=rw, target="/workspace",
                                                            writable=True)]
    async with LocalSandbox(tmp_path / "app", mounts=mounts, isolation="bwrap") as box:
        assert (await box.exec("cat /experiment/report.md", timeout=10)).stdout == "report"
        assert (await box.exec("touch /experiment/x", timeout=10)).exit_code != 0
        assert (await box.exec("echo edit > /workspace/e.txt", timeout=10)).exit_code == 0
        assert (rw / "e.txt").read_text() == "edit\n"
        assert await box.read_file("/experiment/report.md") == b"report"
        with pytest.raises(SandboxPathError, match="read-only"):
            await box.write_file("/experiment/new.md", b"x")
        await box.write_file("/workspace/w.txt", b"w")
        assert (rw / "w.txt").read_bytes() == b"w"
    with pytest.raises(SandboxPathError):
        LocalSandbox(tmp_path / "app", mounts=[Mount(source=ro, target="/tmp")])


async def test_output_beyond_the_limit_is_cut_but_kept(tmp_path: Path) -> None:
    async with LocalSandbox(tmp_path / "app", isolation="bwrap", max_output_bytes=1000) as box:
        r = await box.exec("python3 -c \"print('a' * 5000 + 'END')\"", timeout=10)
        assert len(r.stdout) < 1200 and r.stdout.startswith("a") and "END" in r.stdout
        assert "omitted" in r.stdout and r.stdout_path in r.stdout
        assert len(await box.read_file(r.stdout_path)) == 5004


async def test_stop_kills_everything_and_is_idempotent(tmp_path: Path) -> None:
    box = LocalSandbox(tmp_path / "app", isolation="bwrap")
    await box.start()
    root = box.root_dir
    n, m = marker(), marker()
    await box.exec(f"nohup sleep {n} >/dev/null 2>&1 & setsid sleep {m} >/dev/null 2>&1 &",
                   timeout=10)
    await box.exec(f"sleep 0.5", timeout=10, background=True)
    assert wait_alive(n) and wait_alive(m)
    await box.stop()
    assert not host_pids(n) and not host_pids(m)
    assert not root.exists(), "a temporary root_dir is removed by stop()"
    assert (tmp_path / "app").is_dir()
    await box.stop()
    with pytest.raises(SandboxError, match="not running"):
        await box.exec("true", timeout=5)


async def test_given_root_dir_is_kept(tmp_path: Path) -> None:
    async with LocalSandbox(tmp_path / "app", root_dir=tmp_path / "trial",
                            isolation="bwrap") as box:
        await box.exec("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt",
                       timeout=10)
    assert (tmp_path / "trial" / "sandbox-logs" / "verifier" / "reward.txt").read_text() == "1\n"
    assert list((tmp_path / "trial" / "logs" / "exec").glob("0001.std*"))
    async with LocalSandbox(tmp_path / "app", root_dir=tmp_path / "trial",
                            isolation="bwrap") as again:
        r = await again.exec("true", timeout=10)
        assert r.stdout_path == "/logs/exec/0002.stdout"  # numbering goes on, nothing lost


async def test_driver_death_is_a_sandbox_error(tmp_path: Path) -> None:
    async with LocalSandbox(tmp_path / "app", isolation="bwrap") as box:
        os.kill(box._proc.pid, 9)
        with pytest.raises(SandboxError, match="start a new"):
            for _ in range(50):
                await box.exec("true", timeout=5)
                await asyncio.sleep(0.02)


async def test_bwrap_start_failure_is_explained(tmp_path: Path) -> None:
    bad = Mount(source=tmp_path, target="/usr/bin/cannot/mount/here")
    box = LocalSandbox(tmp_path / "app", mounts=[bad], isolation="bwrap")
    with pytest.raises(SandboxError, match="bubblewrap could not start.*apt-get install"):
        await box.start()
    assert not box.root_dir.exists()


async def test_many_sandboxes_need_no_thread_each(tmp_path: Path) -> None:
    boxes = [LocalSandbox(tmp_path / f"app{i}", isolation="bwrap") for i in range(24)]
    await asyncio.gather(*(b.start() for b in boxes))
    try:
        threads = threading.active_count()
        results = await asyncio.gather(*(b.exec(f"echo {i}", timeout=20)
                                         for i, b in enumerate(boxes)))
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(24)]
        assert threading.active_count() <= threads + 2
        assert threads < 24
    finally:
        await asyncio.gather(*(b.stop() for b in boxes))


_ORPHAN = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from ahe.sandbox.local import LocalSandbox

    async def main():
        box = LocalSandbox(Path(sys.argv[1]), isolation=sys.argv[3])
        await box.start()
        await box.exec("nohup sleep " + sys.argv[2] + " >/dev/null 2>&1 &", timeout=10)
        print(box.root_dir, flush=True)
        if sys.argv[4] == "hang":
            await asyncio.sleep(120)
        # else: return without stop(); the finalizer must clean up at exit

    asyncio.run(main())
""")


@pytest.mark.parametrize("isolation", ["bwrap", "none"])
@pytest.mark.parametrize("how", ["killed", "no-stop"])
async def test_nothing_leaks_when_python_dies_or_forgets_stop(
    tmp_path: Path, isolation: str, how: str
) -> None:
    n = marker()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-W", "ignore", "-c", _ORPHAN, str(tmp_path / "app"), str(n), isolation,
        "hang" if how == "killed" else "exit", stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent)
    root = Path((await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip())
    if how == "killed":
        assert await asyncio.to_thread(wait_alive, n)
        proc.kill()
    await asyncio.wait_for(proc.wait(), 30)
    assert await asyncio.to_thread(wait_gone, n), f"sleep {n} outlived its Python process"
    if how == "no-stop":
        assert not root.exists()
    else:  # nothing could run in a SIGKILLed process: its temporary folders stay behind
        shutil.rmtree(root, ignore_errors=True)
        remove_temp_folders_of(proc.pid)


def test_an_agent_shaped_archive_never_writes_outside_its_folder(tmp_path):
    """Members that escape (../, absolute, a link out and a write through it) are skipped; the rest land."""
    import io
    import tarfile

    from ahe.sandbox.local_files import extract_untrusted_tar

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        def add(name: str, data: bytes = b"x", **kw) -> None:
            info = tarfile.TarInfo(name)
            for k, v in kw.items():
                setattr(info, k, v)
            info.size = 0 if kw else len(data)
            tar.addfile(info, None if kw else io.BytesIO(data))
        add("ok/file.txt", b"kept")
        add("../escaped.txt")
        add(str(tmp_path / "absolute.txt"))
        add("out", type=tarfile.SYMTYPE, linkname=str(tmp_path))
        add("out/through-link.txt")
    dest = tmp_path / "dest"
    extract_untrusted_tar(buf.getvalue(), dest)
    assert (dest / "ok/file.txt").read_bytes() == b"kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dest"]
