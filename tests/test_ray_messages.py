"""What a new user of the Ray executor is told when something is wrong: a wrong address, Ray not
installed, an address given to the local executor. Each is one sentence within seconds and a
non-zero exit, before a mock server starts, a progress line prints or a run folder is made
(the real CLI, run as a subprocess)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ahe.errors import AheError
from tests.conftest import REPO, SEED

TASKS = REPO / "examples" / "tasks"
POLICY = "rules:\n  - reply: done\n"


def closed_port() -> int:
    """A port nothing listens on: bound by the kernel's choice, then released."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ahe(*args: str, cwd: Path, env: dict | None = None, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env={**os.environ, "RAY_ADDRESS": "", "COLUMNS": "250", **(env or {})})
    return proc, time.monotonic() - t0


def eval_args(tmp_path: Path, *extra: str) -> list[str]:
    (tmp_path / "policy.yaml").write_text(POLICY)
    return ["eval", "--workspace", str(SEED), "--tasks", str(TASKS), "--task", "word-frequency-top",
            "--mock-policy", str(tmp_path / "policy.yaml"), "--out", str(tmp_path / "out"), *extra]


def one_sentence(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def needs_ray() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("AHE_REQUIRE_RAY") == "1":
            pytest.fail("AHE_REQUIRE_RAY=1 but ray is not installed")
        pytest.skip("ray is not installed (pip install -e '.[ray]')")


def test_eval_and_doctor_with_a_closed_port_end_within_seconds_with_one_sentence(tmp_path):
    needs_ray()
    address = f"127.0.0.1:{closed_port()}"
    proc, took = ahe(*eval_args(tmp_path, "--executor", "ray", "--ray-address", address), cwd=tmp_path)
    line = one_sentence(proc.stderr)
    assert proc.returncode == 2 and took <= 15, (proc.returncode, took)
    assert line.startswith(f"error: --ray-address {address}: nothing listens at {address}") and "ray start --head" in line
    assert not (tmp_path / "out").exists()

    proc, took = ahe("doctor", "--ray-address", address, cwd=tmp_path)
    assert proc.returncode == 1 and took <= 15, (proc.returncode, took)
    line = one_sentence(proc.stderr)  # under the table: what stands in the way
    assert line.startswith(f"not ready: ray cluster: --ray-address {address}: nothing listens at {address}")
    assert "ray cluster" in proc.stdout

    proc, took = ahe("doctor", "--json", cwd=tmp_path, env={"RAY_ADDRESS": address})  # the address from the environment
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert proc.returncode == 1 and took <= 15
    assert checks["ray cluster"]["ok"] is False and address in checks["ray cluster"]["detail"]


def test_a_port_that_answers_but_is_not_ray_is_refused_by_the_probe():
    """The dashboard's port, or any other server: told apart from a Ray GCS before ray.init waits on it."""
    from ahe.rollout.ray_probe import probe

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        def answer() -> None:  # an HTTP/1 server's answer to anything it does not understand
            conn, _ = server.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

        t = threading.Thread(target=answer, daemon=True)
        t.start()
        with pytest.raises(AheError, match=f"127.0.0.1:{port} answers but is not a Ray head's GCS port"):
            probe(f"127.0.0.1:{port}", timeout=5)
        t.join(5)
    for bad in ("6379", "host:", "host:99999", "ray://:10001"):
        with pytest.raises(AheError, match="give host:port"):
            probe(bad)


def test_missing_ray_is_one_sentence_naming_the_extra_before_anything_starts(tmp_path):
    """Ray absent (a sitecustomize on PYTHONPATH blocks it: `import ray` fails, find_spec finds
    nothing): the sentence keeps its `[ray]`, and no mock server, progress line or run folder came first."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['ray'] = None  # as if Ray were not installed\n")
    env = {"PYTHONPATH": os.pathsep.join([str(shim), str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc, took = ahe(*eval_args(tmp_path, "--executor", "ray"), cwd=tmp_path, env=env)
    line = one_sentence(proc.stderr)
    assert proc.returncode == 2 and took <= 15
    assert line == ("error: --executor ray needs Ray: pip install 'ahe[ray]' "
                    "(on the driver and on every node of the cluster)")
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()

    proc, _ = ahe("doctor", "--json", cwd=tmp_path, env=env)  # JSON: a table wraps with the terminal's width
    row = next(check for check in json.loads(proc.stdout)["checks"] if check["name"] == "ray (executor ray)")
    assert "pip install 'ahe[ray]'" in row["fix"], row  # the fix, not `pip install 'ahe'`
    proc, _ = ahe("doctor", "--ray-address", "127.0.0.1:6379", cwd=tmp_path, env=env)
    assert proc.returncode == 1  # asked about a cluster it cannot reach: not ready


@pytest.mark.parametrize("command", ["eval", "evolve"])
def test_missing_ray_is_named_before_the_address_is_probed(tmp_path, command):
    """Ray absent and an address where nothing listens: the missing extra is what is said (the
    address is not probed first; probing it would only tell the user about a cluster they cannot
    use yet), within seconds, before any run folder."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['ray'] = None  # as if Ray were not installed\n")
    env = {"PYTHONPATH": os.pathsep.join([str(shim), str(REPO), os.environ.get("PYTHONPATH", "")])}
    flags = ["--executor", "ray", "--ray-address", f"127.0.0.1:{closed_port()}"]
    if command == "eval":
        args = eval_args(tmp_path, *flags)
    else:
        from ahe.demo import write_demo

        args = ["evolve", str(write_demo(tmp_path / "exp", iterations=1)), "--run-dir", str(tmp_path / "runs"), "-q", *flags]
    proc, took = ahe(*args, cwd=tmp_path, env=env)
    line = one_sentence(proc.stderr)
    assert proc.returncode == 2 and took <= 15, (proc.returncode, took)
    assert line == ("error: --executor ray needs Ray: pip install 'ahe[ray]' "
                    "(on the driver and on every node of the cluster)")
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_ray_address_with_the_local_executor_is_refused_not_ignored(tmp_path):
    proc, took = ahe(*eval_args(tmp_path, "--ray-address", "10.0.0.5:6379"), cwd=tmp_path)
    line = one_sentence(proc.stderr)
    assert proc.returncode == 2 and took <= 15
    assert line == ("error: --ray-address 10.0.0.5:6379 is only used with --executor ray: add --executor ray to run "
                    "the trials on that cluster, or drop --ray-address to run them on this machine")
    assert not (tmp_path / "out").exists()


def test_evolve_with_a_closed_port_says_so_before_making_a_run_folder(tmp_path):
    needs_ray()
    from ahe.demo import write_demo

    config = write_demo(tmp_path / "exp", iterations=1)
    address = f"127.0.0.1:{closed_port()}"
    proc, took = ahe("evolve", str(config), "--run-dir", str(tmp_path / "run"), "-q", "--executor", "ray",
                     "--ray-address", address, cwd=tmp_path)
    line = one_sentence(proc.stderr)
    assert proc.returncode == 2 and took <= 15, (proc.returncode, took)
    assert line.startswith(f"error: --ray-address {address}: nothing listens at {address}")
    assert not (tmp_path / "run").exists()


class SilentGrpcServer:
    """Answers the HTTP/2 preface with a SETTINGS frame, then says nothing: past the probe, a
    server on which `ray.init` would wait for minutes."""

    def __init__(self, host: str) -> None:
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
                conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            except OSError:
                return
            self.conns.append(conn)

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()


def connect_in_subprocess(address: str, init_timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    code = ("import sys\nfrom ahe.errors import AheError\nfrom ahe.rollout.ray_executor import connect\n"
            f"try:\n    connect({address!r}, init_timeout={init_timeout})\nexcept AheError as e:\n"
            "    print(e, file=sys.stderr)\n    sys.exit(2)\n")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RAY_ADDRESS": ""})
    return proc, time.monotonic() - t0


def test_a_server_that_passes_the_probe_but_never_answers_ray_is_bounded():
    """ray.init gets `init_timeout` seconds (30 in use), then the driver stops with a sentence: the
    thread still waiting inside Ray does not keep the process alive."""
    needs_ray()
    server = SilentGrpcServer("0.0.0.0")  # also at the address Ray swaps 127.0.0.1 for
    try:
        proc, took = connect_in_subprocess(f"127.0.0.1:{server.port}", init_timeout=3)
    finally:
        server.close()
    # unbounded, ray.init waits here for minutes; bounded, 3 s after Python and Ray are imported
    assert proc.returncode == 2 and took <= 45, (proc.returncode, took, proc.stderr[-2000:])
    assert f"--ray-address 127.0.0.1:{server.port}: the cluster did not let this driver join within 3s" in proc.stderr


def test_a_loopback_address_is_also_probed_where_ray_really_connects():
    needs_ray()
    from ahe.rollout.ray_probe import ray_target

    server = SilentGrpcServer("127.0.0.1")  # on the loopback only
    try:
        real = ray_target(f"127.0.0.1:{server.port}")
        if real in (None, f"127.0.0.1:{server.port}"):
            pytest.skip("Ray keeps 127.0.0.1 on this machine (no other address)")
        proc, took = connect_in_subprocess(f"127.0.0.1:{server.port}", init_timeout=90)
    finally:
        server.close()
    assert proc.returncode == 2 and took < 60, (proc.returncode, took, proc.stderr[-2000:])  # told by the probe, not the bound
    assert f"Ray connects to {real} instead" in proc.stderr
