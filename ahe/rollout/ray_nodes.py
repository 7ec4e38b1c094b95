"""Which node of the Ray cluster can take the next trial, from the resources each node declares.

Ray places runner actors on each node (`ray_worker.TrialRunner`: one per TRIALS_PER_RUNNER
CPUs the node declares, so no one process juggles more than ~16 trials); a trial takes the CPUs and
memory its task.toml asks for (`[environment] cpus, memory_mb`; 1 CPU when unset) out of
that node's declared resources, and a docker trial only goes to a node that declares the
custom `docker` resource. Trials start as nodes free up, under the run's concurrency cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# Trials one runner process holds at most (at 1 CPU per trial). One asyncio process runs
# its trials' model calls, sandbox commands and file work one at a time; at 64 trials in one
# process the bursts in which every trial acts at once (start, each model turn, the end)
# queue for seconds (bench_ray.py at 128: 78–85 % efficiency with a runner per node of 64
# trials, 91 % with runners of 32, 92 % with runners of 16, on the same 2 cores).
TRIALS_PER_RUNNER = 16


@dataclass(frozen=True)
class Need:
    cpus: float = 1.0
    memory_bytes: float = 0.0
    docker: bool = False


@dataclass
class NodeSlot:
    node_id: str
    label: str
    cpus: float
    memory_bytes: float
    docker: bool
    runners: list = field(default_factory=list)  # the node's TrialRunner handles that answered
    pending: list = field(default_factory=list)  # handles of runners still starting
    load: dict = field(default_factory=dict)  # id(runner handle) → trials running on it
    used_cpus: float = 0.0
    used_memory: float = 0.0
    running: int = 0
    dead: bool = False
    died_at: float = 0.0

    def fits(self, need: Need) -> bool:
        if self.dead or (need.docker and not self.docker):
            return False
        if need.cpus > self.cpus or need.memory_bytes > self.memory_bytes:
            return False  # never fits here, whatever is running
        return self.used_cpus + need.cpus <= self.cpus + 1e-9 and self.used_memory + need.memory_bytes <= self.memory_bytes

    def could_ever_fit(self, need: Need) -> bool:
        return not self.dead and (self.docker or not need.docker) and need.cpus <= self.cpus and need.memory_bytes <= self.memory_bytes

    def take(self, need: Need) -> None:
        self.used_cpus += need.cpus
        self.used_memory += need.memory_bytes
        self.running += 1

    def runner_count(self) -> int:
        """How many runner processes this node gets: one per TRIALS_PER_RUNNER CPUs (at most 8)."""
        return max(1, min(8, math.ceil(self.cpus / TRIALS_PER_RUNNER)))

    def least_loaded(self) -> Any:
        runner = min(self.runners, key=lambda r: self.load.get(id(r), 0))
        self.load[id(runner)] = self.load.get(id(runner), 0) + 1
        return runner

    def release(self, runner: Any) -> None:
        self.load[id(runner)] = max(0, self.load.get(id(runner), 0) - 1)

    def handles(self) -> list:
        return list({id(h): h for h in (*self.runners, *self.pending)}.values())

    def give_back(self, need: Need) -> None:
        self.used_cpus = max(0.0, self.used_cpus - need.cpus)
        self.used_memory = max(0.0, self.used_memory - need.memory_bytes)
        self.running = max(0, self.running - 1)


def alive_nodes(nodes: list[dict]) -> dict[str, NodeSlot]:
    """NodeSlots of the alive nodes that have CPUs, from `ray.nodes()`."""
    out = {}
    for n in nodes:
        res = n.get("Resources") or {}
        if not n.get("Alive") or res.get("CPU", 0) <= 0:
            continue
        nid = n["NodeID"]
        label = f"{n.get('NodeName') or n.get('NodeManagerAddress')}/{nid[:6]}"
        out[nid] = NodeSlot(nid, label, float(res["CPU"]), float(res.get("memory", 0.0)), res.get("docker", 0) > 0)
    return out


def pick_node(slots: dict[str, NodeSlot], need: Need) -> NodeSlot | None:
    """The node with the most free CPUs that fits `need` now (spreads trials over nodes)."""
    fitting = [s for s in slots.values() if s.runners and s.fits(need)]
    return max(fitting, key=lambda s: (s.cpus - s.used_cpus, -s.running), default=None)


def need_of(task: Any, *, cpus: float | None, docker: bool) -> Need:
    """What one trial of `task` takes: config's cpus per trial, else task.toml's, else 1."""
    env = task.environment
    c = cpus if cpus is not None else (env.cpus or 1.0)
    return Need(cpus=float(c), memory_bytes=float((env.memory_mb or 0) * 1024 * 1024), docker=docker)
