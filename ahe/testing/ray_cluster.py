"""A real multi-node Ray cluster on this machine, for tests and benchmarks of the Ray executor.

Each node is its own `ray start --block` process group (a head, then workers joining it by
address), with its own small resources, its own free ports and its own temp folder, so it
collides with nothing else on the machine and can be killed on its own (a node lost
mid-run). Nodes advertise 127.0.0.2: traffic stays on the loopback range, and Ray does not
rewrite that address to the machine's external one as it does 127.0.0.1.
`stop()` ends every process group it started, and nothing else.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

NODE_IP = "127.0.0.2"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_bin() -> str:
    here = Path(sys.executable).with_name("ray")
    return str(here) if here.exists() else (shutil.which("ray") or "ray")


@dataclass
class Node:
    name: str
    proc: subprocess.Popen
    log: Path


@dataclass
class LocalRayCluster:
    """Start with `start(head_cpus)`, `add_node(cpus)`; `address` is what drivers join."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix=f"ahe-ray-{os.getpid()}-", dir="/tmp")))
    nodes: list[Node] = field(default_factory=list)
    gcs_port: int = 0

    @property
    def address(self) -> str:
        return f"{NODE_IP}:{self.gcs_port}"

    @property
    def temp_dir(self) -> Path:
        return self.root / "ray"  # Ray's session folders (session_*/logs, runtime_resources …)

    def env(self) -> dict[str, str]:
        # TMPDIR: the runners' folder cache and trial scratch live in the cluster's folder and go with it
        return dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_ADDRESS="", TMPDIR=str(self.root / "tmp"))

    def _ports(self) -> list[str]:
        # Single ports come from the kernel's ephemeral range (free now); worker ports from a
        # random block below it, so the two never overlap.
        lo = random.randrange(20000, 32000 - 200)
        return [
            f"--node-manager-port={_free_port()}", f"--object-manager-port={_free_port()}",
            f"--metrics-export-port={_free_port()}", f"--runtime-env-agent-port={_free_port()}",
            f"--dashboard-agent-listen-port={_free_port()}", f"--dashboard-agent-grpc-port={_free_port()}",
            f"--min-worker-port={lo}", f"--max-worker-port={lo + 150}",
        ]

    def _spawn(self, name: str, args: list[str], cpus: float, resources: dict[str, float]) -> Node:
        log = self.root / f"{name}.log"
        argv = [_ray_bin(), "start", "--block", f"--node-ip-address={NODE_IP}", "--disable-usage-stats",
                f"--num-cpus={cpus:g}", f"--resources={json.dumps(resources)}", "--object-store-memory=80000000",
                *args, *self._ports()]
        proc = subprocess.Popen(argv, env=self.env(), start_new_session=True, stdout=open(log, "w"), stderr=subprocess.STDOUT)
        node = Node(name, proc, log)
        self.nodes.append(node)
        return node

    def start(self, cpus: float = 1, resources: dict[str, float] | None = None, timeout: float = 60) -> "LocalRayCluster":
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(exist_ok=True)
        self.gcs_port = _free_port()
        self._spawn("head", [ "--head", f"--port={self.gcs_port}", "--include-dashboard=false",
                             f"--dashboard-port={_free_port()}", f"--temp-dir={self.temp_dir}"], cpus, resources or {})
        self.wait_for(1, timeout)
        return self

    def add_node(self, name: str, cpus: float = 1, resources: dict[str, float] | None = None, timeout: float = 60) -> Node:
        node = self._spawn(name, [f"--address={self.address}"], cpus, resources or {})
        self.wait_for(self.alive_count() + 1, timeout)
        return node

    def status(self) -> list[dict]:
        """Alive nodes as `ray.nodes()` reports them; this process joins the cluster as a driver."""
        import ray

        if not ray.is_initialized():
            try:
                ray.init(address=self.address, logging_level="ERROR", log_to_driver=False, include_dashboard=False)
            except ConnectionError:
                return []
        return [{"id": n["NodeID"], "resources": n["Resources"]} for n in ray.nodes() if n["Alive"]]

    def alive_count(self) -> int:
        return len(self.status())

    def wait_for(self, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [x for x in self.nodes if x.proc.poll() is not None]
            if dead:
                raise RuntimeError(f"ray node {dead[0].name} exited: {dead[0].log.read_text()[-2000:]}")
            if self.alive_count() >= n:
                return
            time.sleep(0.5)
        raise RuntimeError(f"the local Ray cluster did not reach {n} alive nodes in {timeout:.0f}s")

    def kill_node(self, name: str) -> None:
        """SIGKILL everything of one node at once: its raylet, its workers, their sandboxes."""
        node = next(x for x in self.nodes if x.name == name)
        _kill_session(node.proc, signal.SIGKILL)

    def stop(self) -> None:
        for node in reversed(self.nodes):  # workers first, the head last
            _kill_session(node.proc, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for node in self.nodes:
            try:
                node.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _kill_session(node.proc, signal.SIGKILL)  # whatever of the node is left
            try:
                node.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


def _session_members(sid: int) -> list[int]:
    """Processes of session `sid`. A node is started with start_new_session, so its session is
    its own; Ray puts each worker in a process group of its own, but they stay in the session."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # after "pid (comm)": state ppid pgrp session
            pids.append(int(d.name))
    return pids


def _kill_session(proc: subprocess.Popen, sig: int) -> None:
    for pid in _session_members(proc.pid):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
