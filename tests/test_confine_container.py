"""The confined worker in a container of its own beside a docker sandbox (ahe/confine/container.py).

A real Docker engine (tests/docker_support.py), images built offline, the scripted MOCK model over
HTTP. The worker's interpreter comes through the host's own dynamic loader, so it must start in an
image with no libc at all, in the busybox base and in a musl one; the task's container must show
nothing of it; an engine it cannot run on is one sentence.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml

from ahe.confine import container
from ahe.confine.host import ConfinedSessionSpec, describe_confined, run_confined_session, worker_mode
from ahe.runtime.results import StopReason
from tests.conftest import SEED
from tests.docker_support import base_image, docker_engine  # noqa: F401  (fixtures)

pytestmark = pytest.mark.docker
MUSL_LOADER = Path("/lib/ld-musl-x86_64.so.1")


def _import_image(client, tag: str, files: dict[str, bytes], links: dict[str, str]) -> str:
    """An image made of exactly `files` and `links` (and the folders they need), no registry."""
    buf = io.BytesIO()
    dirs = {"tmp", "dev", "proc", "sys", "etc", "root"}
    for path in [*files, *links]:
        parent = os.path.dirname(path)
        while parent:
            dirs.add(parent)
            parent = os.path.dirname(parent)
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in sorted(dirs):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o700 if d == "root" else 0o755
            tar.addfile(info)
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
        for path, target in links.items():
            info = tarfile.TarInfo(path)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    repo, _, version = tag.partition(":")
    client.api.import_image_from_data(buf.getvalue(), repository=repo, tag=version)
    return tag


def _images(client, base: str) -> dict[str, str]:
    """No libc at all; AHE's busybox base; a musl root (Alpine's layout) when musl is installed here."""
    out = {"empty": _import_image(client, "ahe-test-empty:1", {"etc/os-release": b"ID=empty\n"}, {}),
           "busybox": base}
    if MUSL_LOADER.exists():
        busybox = Path(shutil.which("busybox") or "/bin/busybox").read_bytes()
        out["musl"] = _import_image(
            client, "ahe-test-musl:1",
            {"lib/ld-musl-x86_64.so.1": MUSL_LOADER.resolve().read_bytes(), "bin/busybox": busybox,
             "etc/os-release": b"ID=alpine\n"},
            {"bin/sh": "/bin/busybox", "lib/libc.musl-x86_64.so.1": "ld-musl-x86_64.so.1"})
    return out


def test_the_worker_starts_through_the_hosts_loader_in_any_image(docker_engine, base_image, monkeypatch):
    images = _images(docker_engine, base_image)
    for name, image in images.items():
        monkeypatch.setattr(container, "worker_image", lambda client, image=image: image)
        problem, description = _run(describe_confined(SEED, "docker"))
        assert problem is None, f"{name}: {problem}"
        assert description and description["tools"], name


@pytest.mark.skipif(os.geteuid() != 0, reason="as another user the worker runs with that user's own uid")
def test_a_workspace_only_its_owner_can_read_still_loads_in_the_workers_container(tmp_path, docker_engine):
    """A umask of 077 (or a Ray node's unpacked cache) leaves the harness 0700/0600: the worker's
    uid gets a readable copy, and the user's folder is left as it was."""
    ws = tmp_path / "ws"
    shutil.copytree(SEED, ws)
    for folder, _, files in os.walk(ws):
        os.chmod(folder, 0o700)
        for f in files:
            os.chmod(os.path.join(folder, f), 0o600)
    problem, description = _run(describe_confined(ws, "docker"))
    assert problem is None and description and description["tools"], problem
    assert (ws / "agent.yaml").stat().st_mode & 0o777 == 0o600 and ws.stat().st_mode & 0o777 == 0o700
    private = tmp_path / "private"
    private.mkdir()
    assert container.worker_readable(ws, private) == private / "workspace"
    assert container.worker_readable(SEED, private) == SEED.resolve()  # readable as it is: bound, not copied


def _run(coro):
    import asyncio

    return asyncio.run(coro)


def test_an_engine_of_another_architecture_is_one_sentence(docker_engine, monkeypatch):
    info = docker_engine.info()
    monkeypatch.setattr(container, "_check_engine_cached", container._check_engine_cached.__wrapped__)
    monkeypatch.setattr(type(docker_engine), "info", lambda self: {**info, "Architecture": "aarch64"})
    with pytest.raises(container.ContainerUnfit) as err:
        _run(describe_confined(SEED, "docker"))
    text = str(err.value)
    assert "aarch64" in text and "--sandbox docker" in text and "architecture" in text and "\n" not in text
    from ahe.errors import AheError
    from ahe.tasks.sandboxes import ready_backend

    with pytest.raises(AheError) as err:  # and a run stops at its start, before any trial
        ready_backend("docker", "auto")
    assert str(err.value) == text


def test_an_engine_that_cannot_start_the_interpreter_is_one_sentence(docker_engine, monkeypatch):
    """E.g. a Docker socket mounted from another machine's engine: the binds name that machine's
    folders, so the interpreter is not there. Probed once, before any trial."""
    rt = container.host_runtime()
    monkeypatch.setattr(container, "host_runtime", lambda: container.HostRuntime(
        loader=f"{container.LIB_ROOT}/0/no-such-loader.so", own_libs=rt.own_libs, binds=rt.binds))
    monkeypatch.setattr(container, "_probe_cached", container._probe_cached.__wrapped__)
    with pytest.raises(container.ContainerUnfit) as err:
        container.ready_for_workers(docker_engine)
    text = str(err.value)
    assert "does not start in a container" in text and "see its folders" in text and "\n" not in text


PROBE_MW = '''
import os
from ahe.runtime import Middleware

class Where(Middleware):
    async def before_session(self, session):
        pid1 = open("/proc/1/cmdline", "rb").read().replace(b"\\0", b" ").decode()
        nets = [line.split(":")[0].strip() for line in open("/proc/net/dev").read().splitlines()[2:]]
        writable = []
        for d in ("/", "/etc", "/run/ahe", "/workspace", "/opt/ahe/ahe", "/opt/ahe-py/0", "/opt/ahe-lib/0", "/app"):
            try:
                open(os.path.join(d, "w"), "w").close()
                writable.append(d)
            except OSError:
                pass
        session.note("where", pid1=pid1, writable=writable, uid=os.getuid(), nets=nets, tests=os.path.exists("/tests"),
                     app=os.listdir("/app") if os.path.isdir("/app") else [], home=os.path.exists(os.path.expanduser("~root/.bashrc")))
'''
# What the agent's own commands in the task's container can find of the worker: nothing.
LOOK = ("for p in /run/ahe /opt/ahe /opt/ahe-py /opt/ahe-lib /workspace /trace; do [ -e $p ] && echo FOUND $p; done; "
        "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'ahe[.]confine[.]worker'; echo end")


def _probe_workspace(tmp_path: Path, source: str = PROBE_MW, binding: str = "where:Where") -> Path:
    """The seed harness plus one middleware (`source`, bound as middleware.<binding>)."""
    ws = tmp_path / "ws"
    shutil.copytree(SEED, ws)
    (ws / "middleware").mkdir()
    (ws / "middleware" / f"{binding.split(':')[0]}.py").write_text(source)
    cfg = yaml.safe_load((ws / "agent.yaml").read_text())
    cfg["middleware"] = [{"binding": f"middleware.{binding}"}]
    (ws / "agent.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return ws


async def test_the_worker_runs_in_its_own_container_and_the_tasks_container_shows_nothing_of_it(
        tmp_path, docker_engine, base_image, mock_llm):
    from ahe.sandbox.docker import DockerSandbox

    policy = {"name": "look (MOCK)", "rules": [
        {"name": "end", "match": {"turn_min": 2}, "reply": "Done."},
        {"name": "look", "match": {}, "tool_calls": [{"name": "run_shell_command", "arguments": {"command": LOOK}}]}]}
    sandbox = DockerSandbox(base_image, client=docker_engine)
    await sandbox.start()
    try:
        mode = worker_mode("auto", sandbox)
        res = await run_confined_session(_probe_workspace(tmp_path), ConfinedSessionSpec(
            instruction="go", trace_dir=tmp_path / "t"), mock_llm(policy).client(), sandbox, mode=mode)
    finally:
        await sandbox.stop()
    assert mode == "docker" and res.stop_reason == StopReason.no_tool_call, res.detail
    events = [json.loads(x) for x in (tmp_path / "t" / "events.jsonl").read_text().splitlines()]
    where = next(e for e in events if e.get("type") == "where")
    assert "docker-init" in where["pid1"]  # a container of its own, not the host's bwrap
    assert where["writable"] == []  # only its private tmpfs: not even the socket's folder (a host folder)
    assert where["nets"] == ["lo"] and not where["tests"] and where["app"] == [] and not where["home"]
    assert where["uid"] == (container.WORKER_UID if os.geteuid() == 0 else os.getuid())
    traj = json.loads((tmp_path / "t" / "trajectory.json").read_text())
    seen = [r["content"] for s in traj["steps"] for r in (s.get("observation") or {}).get("results", [])]
    output = "\n".join(seen)
    assert "end" in output and "FOUND" not in output, output
    assert "\n0\nend" in output, output  # no worker process among the task's
    left = docker_engine.api.containers(all=True, filters={"label": f"{container.LABEL_WORKER}=1"})
    assert not [c for c in left if c["Labels"].get("ahe.owner_pid") == str(os.getpid())]


KILLED_HOST = '''
import asyncio, os, sys
from pathlib import Path
from ahe.confine.host import ConfinedSessionSpec, ConfinedWorker, _NoClient

async def main():
    w = await ConfinedWorker.launch(Path(sys.argv[1]), "docker")
    asyncio.ensure_future(w.run(ConfinedSessionSpec(instruction="go", trace_dir=Path(sys.argv[2])), _NoClient()))
    await w._conn  # the worker is up; its job and its hook follow at once
    await asyncio.sleep(3)
    print(w.proc.container_id, flush=True)
    os.kill(os.getpid(), 9)

asyncio.run(main())
'''


def test_a_worker_whose_hook_is_stuck_ends_when_ahe_is_killed(tmp_path, docker_engine):
    """No --die-with-parent in a container: the worker's own watch of its socket ends it."""
    import subprocess
    import sys
    import time

    ws = tmp_path / "ws"
    shutil.copytree(SEED, ws)
    (ws / "middleware").mkdir()
    (ws / "middleware" / "stuck.py").write_text(
        "import time\nfrom ahe.runtime import Middleware\n\nclass Stuck(Middleware):\n"
        "    def before_session(self, s):\n        s.note('stuck')\n        while True:\n            time.sleep(1)\n")
    cfg = yaml.safe_load((ws / "agent.yaml").read_text())
    cfg["middleware"] = [{"binding": "middleware.stuck:Stuck"}]
    (ws / "agent.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    script = tmp_path / "host.py"
    script.write_text(KILLED_HOST)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, str(script), str(ws), str(tmp_path / "t")], capture_output=True, text=True,
                         timeout=120, env=env)
    cid = out.stdout.strip()
    assert cid, out.stderr[-2000:]
    try:
        for _ in range(100):
            if docker_engine.api.inspect_container(cid)["State"]["Status"] != "running":
                break
            time.sleep(0.1)
        state = docker_engine.api.inspect_container(cid)["State"]
        assert state["Status"] == "exited", state
    finally:
        docker_engine.api.remove_container(cid, force=True)


LOUD = """
import asyncio, sys
from ahe.runtime import Middleware

class Loud(Middleware):
    async def before_session(self, session):
        for _ in range(20):
            sys.stderr.write("x" * (1 << 20))
        sys.stderr.flush()
        session.note("wrote")
        await asyncio.sleep(6)
"""


async def test_what_the_worker_prints_cannot_fill_this_machines_disk(tmp_path, docker_engine, mock_llm):
    """Its stderr lands in the engine's log on this machine: capped at 1 MB, not 20."""
    import asyncio

    ws = _probe_workspace(tmp_path, LOUD, "loud:Loud")
    session = asyncio.ensure_future(run_confined_session(ws, ConfinedSessionSpec(
        instruction="go", trace_dir=tmp_path / "t"), mock_llm({"name": "done", "rules": [], "default": {"reply": "Done."}})
        .client(), mode="docker"))
    events = tmp_path / "t" / "events.jsonl"
    for _ in range(300):
        if events.exists() and '"wrote"' in events.read_text():
            break
        await asyncio.sleep(0.1)
    mine = [c for c in docker_engine.api.containers(filters={"label": f"{container.LABEL_WORKER}=1"})
            if c["Labels"].get("ahe.owner_pid") == str(os.getpid())]
    sizes = [os.path.getsize(docker_engine.api.inspect_container(c["Id"])["LogPath"]) for c in mine]
    await session
    assert '"wrote"' in events.read_text() and len(sizes) == 1
    assert sizes[0] <= 1_100_000, sizes
