"""Executors: where trials run. The scheduler only talks to this protocol.

`AsyncioExecutor` runs trials as tasks in this process under a concurrency limit; a
distributed executor (Ray) implements the same `run` and ships `TrialSpec`s, which are
plain serializable data, to its workers.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, Protocol, Sequence

from ahe.rollout.models import TrialResult, TrialSpec
from ahe.rollout.trial import TrialContext, execute_trial



class OnEvent(Protocol):
    """("start", spec, None) and ("end", spec, result); a distributed executor adds node=<label>."""

    def __call__(self, kind: str, spec: TrialSpec, result: TrialResult | None, **info: str) -> None: ...



class Executor(Protocol):
    async def run(self, specs: Sequence[TrialSpec], *, on_event: OnEvent | None = None) -> list[TrialResult | None]:
        """Run every spec; call on_event("start", spec, None) and ("end", spec, result).

        A spec not started because a stop was requested comes back as None.
        An executor whose trials never load the harness sets `loads_harness = False` (the
        scheduler then skips the workspace-load probe: the decision simulator's executor).
        """
        ...


class AsyncioExecutor:
    """Trials as asyncio tasks in this process, at most `concurrency` at once — or, given `limit`, at
    most as many as that semaphore admits across every executor sharing it."""

    def __init__(
        self,
        concurrency: int = 4,
        ctx: TrialContext | None = None,
        run_trial: Callable[[TrialSpec, TrialContext], Awaitable[TrialResult]] = execute_trial,
        should_stop: Callable[[], bool] | None = None,
        limit: asyncio.Semaphore | None = None,
    ) -> None:
        self.concurrency = max(1, concurrency)
        self.should_stop = should_stop or (lambda: False)
        self.ctx = ctx or TrialContext()
        self._run_trial = run_trial
        self.limit = limit  # shared with other executors running side by side (a tree round's children)

    async def run(self, specs: Sequence[TrialSpec], *, on_event: OnEvent | None = None) -> list[TrialResult | None]:
        sem = self.limit or asyncio.Semaphore(self.concurrency)
        # trials beyond the first `concurrency` start later: their confined workers can be launched ahead
        self.ctx.expect(list(specs[self.concurrency:]))
        failed: list[BaseException] = []

        async def one(spec: TrialSpec) -> TrialResult | None:
            async with sem:
                if self.should_stop() or failed:  # Ctrl-C, or a trial that stops the run: new ones do not start
                    return None
                if on_event:
                    on_event("start", spec, None)
                try:
                    result = await self._run_trial(spec, self.ctx)
                except Exception as exc:  # e.g. TaskChanged (a task rewritten during the run)
                    failed.append(exc)
                    raise
                if on_event:
                    on_event("end", spec, result)
                return result

        # every trial ends before an error propagates: none is left running unobserved (its own
        # error would otherwise be dumped as a traceback when the event loop shuts down)
        try:
            outcomes = await asyncio.gather(*(one(s) for s in specs), return_exceptions=True)
        finally:
            await self.ctx.drain()  # spares never outlive the batch they were launched for
        for out in outcomes:
            if isinstance(out, BaseException):
                raise out
        return list(outcomes)
