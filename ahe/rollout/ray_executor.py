"""`RayExecutor`: the rollout engine's `Executor` on an existing Ray cluster (DESIGN.md §11.4).

Each trial runs on some node of the cluster, in that node's own sandbox (bwrap or docker),
talking to the model endpoint itself. Nothing is assumed shared between the driver and the
nodes: the harness at the evaluated commit and each task folder travel through Ray's object
store, content-addressed (put once per run, unpacked once per node); the finished trial
folder comes back as a tar and the driver writes it into the run folder exactly as the
local executor does, result.json last. A node lost mid-trial gives that trial an `infra`
result (retried under --retry-infra); a killed driver resumes from the run folder like a
local run, so a trial whose result.json was written is never run again.

Ray is an optional extra (`pip install 'ahe[ray]'`), imported only when this executor is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import shutil
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ahe.errors import AheError
from ahe.rollout.executor import OnEvent
from ahe.rollout.models import TrialResult, TrialSpec
from ahe.rollout.ray_nodes import Need, NodeSlot, alive_nodes, need_of, pick_node
from ahe.rollout.ray_probe import probe
from ahe.rollout.ray_transport import content_id, pack_folder, write_trial_folder
from ahe.rollout.trial import RESULT_FILE
from ahe.io import atomic_write_json
from ahe.runtime.trace import now_iso
from ahe.tasks.snapshot import TaskChanged, check_folder

RAY_MISSING = "--executor ray needs Ray: pip install 'ahe[ray]' (on the driver and on every node of the cluster)"
INIT_TIMEOUT_SEC = 30.0  # ray.init on a reachable head takes a few seconds, shipping AHE's code included


def require_ray() -> None:
    """RAY_MISSING unless Ray can be found, without importing it (seconds on a busy machine)."""
    try:
        found = importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise AheError(RAY_MISSING)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise AheError(RAY_MISSING) from None
    return ray


def connect(address: str | None, *, init_timeout: float = INIT_TIMEOUT_SEC) -> Any:
    """Join the cluster at `address` (auto = the one started on this machine) as a driver,
    with this driver's `ahe` shipped to the nodes (see `code_env`). Bounded: the address is
    probed first (ray_probe), and `ray.init` gets `init_timeout` seconds, so a wrong address
    is one sentence within seconds, never Ray retrying its GCS for minutes."""
    joined = sys.modules.get("ray")
    if joined is not None and joined.is_initialized() and _ships_code(joined):
        return joined
    require_ray()  # Ray not installed: the missing extra is what to say, whatever the address
    probe(address)  # before importing Ray (seconds on a busy machine): a wrong address is told at once
    ray = import_ray()
    if ray.is_initialized():
        ray.shutdown()  # joined by someone else without AHE's code: join again, with it
    shown = address or "auto"
    outcome: dict[str, BaseException | None] = {}

    def init() -> None:
        try:
            ray.init(address=shown, logging_level="WARNING", log_to_driver=False, include_dashboard=False,
                     runtime_env=code_env())
            outcome["error"] = None
        except BaseException as exc:  # ConnectionError, ValueError, RuntimeError, a missing ray[client] …
            outcome["error"] = exc

    # a daemon thread: one that never returns cannot keep the process from ending with the sentence
    joiner = threading.Thread(target=init, name="ahe-ray-init", daemon=True)
    with _quiet_thread_warning():
        joiner.start()
        joiner.join(init_timeout)
    if "error" not in outcome:
        raise AheError(f"--ray-address {shown}: the cluster did not let this driver join within {init_timeout:g}s; "
                       f"check `ray status --address {shown}` on the head, and that the driver's Ray version is the cluster's")
    exc = outcome["error"]
    if exc is not None:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AheError(
            f"--ray-address {shown}: cannot join a Ray cluster ({first}); start one with "
            "`ray start --head` on this machine, or give the head's address (host:port, or ray://host:10001 with ray[client])"
        ) from None
    return ray


@contextlib.contextmanager
def _quiet_thread_warning() -> Iterator[None]:
    """Ray warns that it sets no SIGTERM handler when `ray.init` runs off the main thread; the
    driver does not need one (a killed driver's runners end with it), so the warning is noise."""

    class Drop(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return "SIGTERM handler is not set" not in record.getMessage()

    log, drop = logging.getLogger("ray._private.worker"), Drop()
    log.addFilter(drop)
    try:
        yield
    finally:
        log.removeFilter(drop)


def _ships_code(ray: Any) -> bool:
    """Whether this process's Ray job carries a py_modules package (ours: only `connect` adds one)."""
    try:
        return bool((ray.get_runtime_context().runtime_env or {}).get("py_modules"))
    except Exception:
        return False


def resolve_for_workers(spec: TrialSpec) -> tuple[TrialSpec, dict[str, str]]:
    """The spec with endpoint and model fixed on the driver, and the key (name → value) apart.

    Workers then do not depend on their own OPENAI_BASE_URL / AHE_MODEL; the key travels
    only in memory (see ray_worker.TrialRunner).
    """
    from ahe.llm import resolve_role
    from ahe.llm.roles import NO_KEY

    ep = resolve_role("agent", spec.agent_role)
    role = spec.agent_role.model_copy(update={"base_url": ep.base_url, "model": ep.model})
    secrets = {ep.api_key_env: ep.api_key} if ep.api_key and ep.api_key != NO_KEY else {}
    return spec.model_copy(update={"agent_role": role}), secrets


def code_env() -> dict[str, Any]:
    """The runners' runtime env: this driver's own `ahe` package, shipped with the job.

    Ray workers otherwise import whatever `ahe` the node's Python has (another checkout, an
    older release, or none), which silently runs other code than the driver's. Ray uploads
    the package once per content (by hash) and each node unpacks it once; only its
    dependencies (pip install "ahe[ray]") must be on the nodes. No key is ever in it.
    """
    package = Path(__file__).resolve().parents[1]  # ahe/ (this file is ahe/rollout/ray_executor.py)
    return {"py_modules": [str(package)], "excludes": ["__pycache__", "*.pyc"]}


def seal_spec(spec: TrialSpec) -> TrialSpec:
    """The spec with its task's seal travelling with it (the node has no run folder to read it from);
    the live folder is checked against the seal on the driver before it is shipped."""
    from ahe.rollout.trial import seal_of

    seal = seal_of(spec)
    if seal is None:
        return spec
    check_folder(seal, spec.task_dir)
    return spec.model_copy(update={"sealed": seal, "seal_dir": None})


def lost_result(spec: TrialSpec, why: str) -> TrialResult:
    """An infra result for a trial whose worker or node went away; written like any result."""
    res = TrialResult(task=spec.task_name, trial=spec.trial, attempt=spec.attempt, started_at=now_iso())
    res.error_class, res.error = "infra", why
    if spec.trial_dir.exists():
        shutil.rmtree(spec.trial_dir)
    spec.trial_dir.mkdir(parents=True)
    atomic_write_json(spec.trial_dir / RESULT_FILE, json.loads(res.model_dump_json()))
    return res


class RayExecutor:
    """Trials as calls on asyncio runner actors (one per 16 CPUs of a node), at most `concurrency` at once."""

    def __init__(
        self,
        address: str | None = None,
        concurrency: int = 4,
        should_stop: Callable[[], bool] | None = None,
        *,
        cpus_per_trial: float | None = None,
        refresh_sec: float = 2.0,
        no_node_timeout_sec: float = 60.0,
        startup_wait_sec: float = 20.0,
    ) -> None:
        self.address = address
        self.concurrency = max(1, concurrency)
        self.should_stop = should_stop or (lambda: False)
        self.cpus_per_trial = cpus_per_trial
        self.refresh_sec = refresh_sec
        self.no_node_timeout_sec = no_node_timeout_sec
        self.startup_wait_sec = startup_wait_sec
        self.slots: dict[str, NodeSlot] = {}
        self._starting: dict[asyncio.Future, tuple[NodeSlot, Any]] = {}
        self._shipped: dict[str, Any] = {}  # content id → ObjectRef, for the executor's lifetime
        self._secrets: dict[str, str] | None = None
        self._ray: Any = None

    # ------------------------------------------------------------------ cluster
    def _ship(self, folder: Any) -> tuple[str, list]:
        data = pack_folder(folder)
        cid = content_id(data)
        if cid not in self._shipped:
            self._shipped[cid] = self._ray.put(data)
        return cid, [self._shipped[cid]]

    def _refresh(self) -> None:
        """Start runners on every alive node that has none (new nodes join as they appear)."""
        from ahe.rollout.ray_worker import TrialRunner

        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        current = alive_nodes(ray.nodes())
        for nid, slot in list(self.slots.items()):
            if nid not in current:
                slot.dead = True
        for nid, fresh in current.items():
            old = self.slots.get(nid)
            if old is not None and (not old.dead or old.running or time.monotonic() - old.died_at < 3 * self.refresh_sec):
                continue  # has runners, or just lost one: give the cluster time to mark the node dead
            if old is not None:
                self._kill(old)  # what is left of a node's runners after one of them was lost
            remote = ray.remote(TrialRunner).options(
                num_cpus=0,
                max_concurrency=10_000,
                max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False),
            )
            fresh.pending = [remote.remote(self._secrets or {}) for _ in range(fresh.runner_count())]
            self.slots[nid] = fresh
            for handle in fresh.pending:
                self._starting[asyncio.wrap_future(handle.node.remote().future())] = (fresh, handle)

    def _runner_ready(self, fut: asyncio.Future) -> None:
        slot, handle = self._starting.pop(fut)
        slot.pending.remove(handle)
        if fut.exception() is None and not slot.dead:
            slot.runners.append(handle)
            return
        slot.dead, slot.died_at = True, time.monotonic()
        try:
            self._ray.kill(handle)  # the node is being given up: nothing may run there now
        except Exception:
            pass

    def _kill(self, slot: NodeSlot) -> None:
        for handle in slot.handles():
            try:
                self._ray.kill(handle)
            except Exception:  # already gone with its node
                pass
        slot.runners, slot.pending = [], []

    # ------------------------------------------------------------------ run
    async def run(self, specs: Sequence[TrialSpec], *, on_event: OnEvent | None = None) -> list[TrialResult | None]:
        if not specs:
            return []
        self._ray = self._ray or connect(self.address)
        ready, needs, ws, task_refs, seal_refs = self._prepare(specs)
        results: list[TrialResult | None] = [None] * len(specs)
        queue: deque[int] = deque(range(len(specs)))
        in_flight: dict[asyncio.Future, tuple[int, NodeSlot, Any, Any]] = {}
        writing: set[asyncio.Future] = set()  # trial folders being written (see _finish)
        self._refresh()
        await self._await_runners()
        last_refresh, idle_since = time.monotonic(), time.monotonic()

        def emit(kind: str, i: int, res: TrialResult | None, slot: NodeSlot) -> None:
            if on_event:
                on_event(kind, specs[i], res, node=slot.label)  # type: ignore[call-arg]

        try:
            while queue or in_flight or writing:
                if self.should_stop():  # Ctrl-C: running trials finish, queued ones never start
                    queue.clear()
                while queue and len(in_flight) < self.concurrency:
                    i = queue[0]
                    slot = pick_node(self.slots, needs[i])
                    if slot is None:
                        break
                    queue.popleft()
                    slot.take(needs[i])
                    s = ready[i]
                    runner = slot.least_loaded()
                    sealed = seal_refs[s.sealed.snapshot] if s.sealed is not None else (None, None)
                    ref = runner.run_trial.remote(s.model_dump_json(), *ws[s.workspace], *task_refs[s.task_dir], *sealed)
                    in_flight[asyncio.wrap_future(ref.future())] = (i, slot, ref, runner)
                    emit("start", i, None, slot)
                if queue and not in_flight:
                    self._unplaceable(queue, needs, specs, results, idle_since)
                waiting = [*in_flight, *self._starting, *writing]
                if waiting:
                    done, _ = await asyncio.wait(waiting, timeout=self.refresh_sec, return_when=asyncio.FIRST_COMPLETED)
                else:
                    done = set()
                    await asyncio.sleep(min(0.5, self.refresh_sec))
                for fut in done:
                    if fut in self._starting:
                        self._runner_ready(fut)
                    elif fut in writing:
                        writing.remove(fut)
                        fut.result()  # a trial folder that cannot be written is an error of the run
                    elif fut in in_flight:  # not a runner start another run() call (side by side) took first
                        i, slot, _, runner = in_flight.pop(fut)
                        slot.release(runner)
                        slot.give_back(needs[i])
                        outcome = self._outcome(fut, specs[i], slot)
                        writing.add(asyncio.ensure_future(self._finish(outcome, i, specs[i], results, emit, slot)))
                if in_flight:
                    idle_since = time.monotonic()
                if time.monotonic() - last_refresh >= self.refresh_sec:
                    self._refresh()
                    last_refresh = time.monotonic()
        except (asyncio.CancelledError, TaskChanged):  # Ctrl-C twice, or a task changed: the run stops
            for fut, (_, _, ref, _) in in_flight.items():  # cancels the trial's asyncio task in its runner
                self._ray.cancel(ref)
                fut.cancel()  # nobody awaits its TaskCancelledError now: it must not be logged as never retrieved
            if writing:  # folders already coming in are written whole (milliseconds), not cut off
                await asyncio.wait(writing, timeout=10)
            raise
        return results

    def _prepare(self, specs: Sequence[TrialSpec]) -> tuple[list[TrialSpec], list, dict, dict, dict]:
        """Resolve each spec for the workers (keys kept apart), seal it, and ship its workspace,
        task folder and sealed snapshot once: (specs, resource needs, workspace refs, task refs,
        snapshot refs). A changed task stops the run here, before anything is shipped."""
        from ahe.tasks import load_task

        ready, secrets = [], {}
        for spec in specs:
            s, sec = resolve_for_workers(spec)
            ready.append(s)
            secrets.update(sec)
        if self._secrets is not None and secrets != self._secrets:
            self.close()  # different keys: runners are handed keys once, so start new ones
        self._secrets = secrets
        tasks = {s.task_dir: load_task(s.task_dir) for s in ready}
        needs = [need_of(tasks[s.task_dir], cpus=self.cpus_per_trial, docker=s.sandbox == "docker") for s in ready]
        ready = [seal_spec(s) for s in ready]
        ws = {s.workspace: self._ship(s.workspace) for s in ready}
        task_refs = {d: self._ship(d) for d in tasks}
        seal_refs = {s.sealed.snapshot: self._ship(s.sealed.snapshot) for s in ready if s.sealed is not None}
        return ready, needs, ws, task_refs, seal_refs

    async def _await_runners(self) -> None:
        """Let the runners being started come up (bounded) before the first trials are placed,
        so a run spreads over the whole cluster instead of filling the first node that answers."""
        if self._starting:
            await asyncio.wait(list(self._starting), timeout=self.startup_wait_sec)
            for fut in [f for f in self._starting if f.done()]:
                self._runner_ready(fut)

    def _unplaceable(self, queue: deque, needs: list[Need], specs: Sequence[TrialSpec], results: list, idle_since: float) -> None:
        """Trials no node can ever take, or no node at all for too long: infra results, not a hang."""
        usable = [s for s in self.slots.values() if not s.dead]
        for i in list(queue):
            never = usable and not any(s.could_ever_fit(needs[i]) for s in usable)
            starved = not usable and not self._starting and time.monotonic() - idle_since > self.no_node_timeout_sec
            if never or starved:
                queue.remove(i)
                n = needs[i]
                why = (f"ray: no node of the cluster offers {n.cpus:g} CPUs, {n.memory_bytes / 2**20:.0f} MB"
                       f"{' and the docker resource' if n.docker else ''} for this trial" if never
                       else f"ray: no alive node with CPUs for {self.no_node_timeout_sec:.0f}s")
                results[i] = lost_result(specs[i], why)

    def _outcome(self, fut: asyncio.Future, spec: TrialSpec, slot: NodeSlot) -> Any:
        """What a finished call brought back: (result.json, folder), or an infra result for a
        trial whose runner or node was lost (and the node is given up at once)."""
        ray = self._ray
        try:
            return fut.result()
        except ray.exceptions.RayActorError as exc:  # the runner's process or its node died
            slot.dead, slot.died_at = True, time.monotonic()  # no new trials there; _refresh starts new runners
            return lost_result(spec, f"ray: the worker running this trial on node {slot.label} was lost ({type(exc).__name__})")
        except ray.exceptions.RayError as exc:  # object lost, a failure inside the runner …
            return lost_result(spec, f"ray: {type(exc).__name__} on node {slot.label}: {str(exc).strip()[:300]}")

    async def _finish(self, outcome: Any, i: int, spec: TrialSpec, results: list, emit: Callable, slot: NodeSlot) -> None:
        """Write a trial's folder in a thread, then report it. When a whole rollout ends at
        once the driver writes every folder in one burst; written one after another on the
        event loop, the last trial's end came seconds after its result (bench_ray.py)."""
        if isinstance(outcome, TrialResult):
            result = outcome
        elif outcome[1] is None:  # the node found the task or its snapshot changed: the run stops
            raise TaskChanged(outcome[0])
        else:
            result = TrialResult.model_validate_json(outcome[0])
            await asyncio.to_thread(write_trial_folder, outcome[1], spec.trial_dir, result)
        results[i] = result
        emit("end", i, result, slot)

    def close(self) -> None:
        """Stop this executor's runners and drop its shipped folders (the cluster keeps running)."""
        if self._ray is None:
            return
        for slot in self.slots.values():
            self._kill(slot)
        self.slots.clear()
        for fut in self._starting:  # runners still starting, now killed: their errors are expected, not news
            fut.cancel()
        self._starting.clear()
        self._shipped.clear()
