"""Spare workers: a few jails launched ahead, so a trial's session does not wait for imports.

Nothing in a worker's jail is specific to a trial but its socket, and the worker reads its job
(and loads the harness) only when a trial hands it one; so each executor keeps `spares`
launched workers per (workspace, mode), refilled in the background as trials take them. A
spare whose workspace folder was replaced since its launch (another inode) is not used, and no
spare is launched beyond the trials an executor has announced (`expect`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from ahe.confine.host import ConfineMode, ConfinedWorker

DEFAULT_SPARES = 2


def _key(workspace: Path, mode: str) -> tuple[str, str, int]:
    path = Path(workspace).resolve()
    try:
        ino = os.stat(path).st_ino
    except OSError:
        ino = -1
    return str(path), mode, ino


class WorkerPool:
    def __init__(self, spares: int = DEFAULT_SPARES) -> None:
        self.spares = max(0, spares)
        self._idle: dict[tuple[str, str, int], list[ConfinedWorker]] = {}
        self._filling: dict[tuple[str, str, int], set[asyncio.Task]] = {}
        self._closed = False
        self._expected = 0  # trials announced but not yet started: no spare is launched beyond them

    def expect(self, trials: int) -> None:
        """`trials` more sessions will start later (an executor's queue beyond its concurrency):
        up to `spares` of them at a time get a worker launched ahead."""
        self._expected += max(0, trials)

    async def acquire(self, workspace: Path, mode: ConfineMode = "auto") -> ConfinedWorker:
        """A launched worker for `workspace`: a spare when one is alive, else a new one."""
        key = _key(workspace, mode)
        idle = self._idle.setdefault(key, [])
        worker = None
        while idle and worker is None:
            cand = idle.pop(0)
            if cand.proc is not None and cand.proc.returncode is None:
                worker = cand
            else:
                await cand.close()
        self._refill(key, Path(workspace), mode)
        return worker or await ConfinedWorker.launch(workspace, mode)

    def _refill(self, key: tuple[str, str, int], workspace: Path, mode: ConfineMode) -> None:
        if self._closed:
            return
        pending = self._filling.setdefault(key, set())
        wanted = min(self.spares - len(self._idle[key]) - len(pending), self._expected)
        for _ in range(max(0, wanted)):
            self._expected -= 1  # each spare is for one announced trial
            task = asyncio.ensure_future(self._launch(key, workspace, mode))
            pending.add(task)
            task.add_done_callback(pending.discard)

    async def _launch(self, key: tuple[str, str, int], workspace: Path, mode: ConfineMode) -> None:
        try:
            worker = await ConfinedWorker.launch(workspace, mode)
        except Exception:  # a spare that cannot start is not needed: the trial launches its own
            return
        if self._closed:
            await worker.close()
        else:
            self._idle.setdefault(key, []).append(worker)

    async def drain(self) -> None:
        """Kill the spares and forget the announced trials (an executor's batch is over); the
        pool stays usable."""
        self._expected = 0
        await self._kill_spares()

    async def aclose(self) -> None:
        """Stop refilling; kill every spare."""
        self._closed = True
        await self._kill_spares()

    async def _kill_spares(self) -> None:
        tasks = [t for ts in self._filling.values() for t in ts]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for idle in self._idle.values():
            for w in idle:
                await w.close()
        self._idle.clear()
