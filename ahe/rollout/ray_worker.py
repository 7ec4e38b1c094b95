"""The worker side of the Ray executor: asyncio actors on each node run that node's trials.

A trial is mostly waiting (on the model endpoint, on sandbox commands), so one process holds
many of them as asyncio tasks, exactly as the local executor does in one process; a Ray worker
process per trial would cost a Python start-up and ~100 MB each. A node gets one runner per
16 CPUs it declares (ray_nodes.TRIALS_PER_RUNNER), so no process serializes too many trials.

The actor is handed the API keys once, in memory, as a constructor argument: they are kept in
a mapping the model clients read, never put in the process environment (the agent's sandbox
must not see them), never in a Ray runtime environment (Ray's runtime-env agent logs those to
the session folder on disk), never written.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

from ahe.rollout.models import TrialSpec
from ahe.rollout.ray_transport import cached_folder, trial_entries
from ahe.rollout.trial import RESULT_FILE, TrialContext, execute_trial
from ahe.sandbox.local_orphans import sweep_orphan_jails
from ahe.tasks.snapshot import TaskChanged


def _preload() -> None:
    """Import what every trial needs (the openai SDK alone takes ~1 s) before the runner says
    it is ready, so the node's first trial does not stall the trials started beside it."""
    import ahe.confine.host  # noqa: F401
    import ahe.llm.client  # noqa: F401
    import ahe.runtime  # noqa: F401
    import ahe.sandbox.local  # noqa: F401
    import ahe.tasks  # noqa: F401


class TrialRunner:
    """Runs trials on the node it was placed on; wrapped by `ray.remote` in the executor."""

    def __init__(self, secrets: dict[str, str], cache_root: str | None = None) -> None:
        env = dict(os.environ)
        env.update(secrets)
        self.ctx = TrialContext(env=env)
        base = Path(cache_root or tempfile.gettempdir())
        self.cache = base / f"ahe-ray-cache-{os.getuid()}"
        self.scratch = base / f"ahe-ray-trials-{os.getuid()}"
        self._fetching: dict[str, asyncio.Future] = {}
        _preload()
        sweep_orphan_jails()  # jails a killed runner of this node left running (reparented to init)

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    async def run_trial(
        self, spec_json: str, workspace_id: str, workspace_ref: list, task_id: str, task_ref: list,
        sealed_id: str | None = None, sealed_ref: list | None = None,
    ) -> tuple[str, list | None]:
        """Run one trial here; return its result and its folder's entries (but result.json), or
        (the sentence, None) when the task or its sealed snapshot changed (the driver stops the run)."""
        workspace = await self._folder("workspaces", workspace_id, workspace_ref)
        task_dir = await self._folder("tasks", task_id, task_ref)
        spec = TrialSpec.model_validate_json(spec_json)
        if spec.sealed is not None and sealed_id is not None and sealed_ref is not None:
            # the verifier runs from this node's copy of the snapshot, checked against the driver's seal
            snapshot = await self._folder("sealed", sealed_id, sealed_ref)
            spec = spec.model_copy(update={"sealed": spec.sealed.model_copy(update={"snapshot": snapshot})})
        self.scratch.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="trial-", dir=self.scratch))
        try:
            local = spec.model_copy(
                update={"workspace": workspace, "task_dir": task_dir, "trial_dir": scratch / spec.task_name / f"trial-{spec.trial}"}
            )
            try:
                result = await execute_trial(local, self.ctx)
            except TaskChanged as exc:
                return str(exc), None
            # a trial folder is small (its bulk, /app, is deleted after grading): reading it
            # inline costs less than a hop to a thread on a busy node
            entries = trial_entries(local.trial_dir, skip_files=frozenset({RESULT_FILE}))
            return result.model_dump_json(), entries
        finally:  # off the reply's path
            asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, scratch, True)

    async def _folder(self, kind: str, cid: str, ref: list) -> Path:
        """The node's unpacked copy of a shipped folder; only a first fetch leaves the event loop,
        and trials that need the same folder meanwhile wait for that one fetch."""
        path = self.cache / kind / cid
        if path.is_dir():
            return path
        fetch = self._fetching.get(cid)
        if fetch is None:
            fetch = self._fetching[cid] = asyncio.ensure_future(
                asyncio.to_thread(cached_folder, self.cache / kind, cid, ref, shared=kind == "workspaces"))
            fetch.add_done_callback(lambda _: self._fetching.pop(cid, None))
        return await asyncio.shield(fetch)  # a cancelled trial does not cancel the others' fetch
