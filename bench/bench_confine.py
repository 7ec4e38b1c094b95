"""Benchmark — the confined worker and model gateway, side by side with the in-process session.

    python bench/bench_confine.py                              # overhead (100 calls, 3 repeats) + concurrency 8..128
    python bench/bench_confine.py --repeat 1 --sessions 8 --calls 20   # smoke size

Overhead (latency 0, each configuration in a fresh process, interleaved per repeat): a session
of `calls` model calls, every call but the last asking for one tool call, with
  noop    the no-op tool workspace (bench/workspaces/noop)
  shell   the seed harness's shell tool in a persistent local bwrap sandbox
each run (a) in-process — `Session` in the benchmark's own process, as before issue 21 — and
(b) confined — the session in a bwrap worker, its model calls through the gateway and its
sandbox calls over the worker's socket. Per step, overhead = the interval between two model
requests seen by the mock server minus the raw HTTP round trip of the same request (as in
bench_overhead.py). Session start = from creating the session (in-process) or taking a spare
worker (confined: as a trial does, ahe/confine/pool.py) to the mock's arrival of the first
request; cold start = the same for the warm-up session, whose worker is launched on the spot.
CPU/step = the CPU time of the benchmark process and of its children (the worker's jail, waited
for when it closes) over the measured session, per model call: less sensitive to other load
than the wall-clock overhead.

Concurrency (1 s mock latency, 20 calls per session, so the ideal wall time is 20 s): M
sessions at once on one event loop, in-process and confined. The confined workers are launched
before the clock starts — a trial launches its worker while its sandbox starts and the task is
set up — and their start-up is reported apart. Memory per session: the resident growth of the
benchmark process plus the proportional set size (PSS) of the jails, divided by M.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BENCH, INSTRUCTION, REPO, MockProcess, median, ms, session_steps, step_policy, table, write_result  # noqa: E402
from bench_overhead import analyse  # noqa: E402

MB = 1024 * 1024


def _workspace(tool: str) -> Path:
    return BENCH / "workspaces" / "noop" if tool == "noop" else REPO / "harness_workspace"


async def _sandbox(tool: str, folder: Path) -> Any:
    if tool != "shell":
        return None
    from ahe.sandbox.local import LocalSandbox

    sb = LocalSandbox(folder / "app", root_dir=folder / "sandbox", isolation="bwrap")
    await sb.start()
    return sb


async def _session(mode: str, tool: str, client: Any, sandbox: Any, trace: Path, instruction: str,
                   worker: Any = None) -> Any:
    if mode == "inproc":
        from ahe.runtime import Session, load_agent

        return await Session(load_agent(_workspace(tool)), client, sandbox=sandbox, trace_dir=trace).run(instruction)
    from ahe.confine.host import ConfinedSessionSpec, ConfinedWorker

    worker = worker or await ConfinedWorker.launch(_workspace(tool), "bwrap")
    try:
        return await worker.run(ConfinedSessionSpec(instruction=instruction, trace_dir=trace), client, sandbox)
    finally:
        await worker.close()


def _rusage_cpu() -> float:
    """User+system CPU of this process and its waited-for children (microsecond resolution)."""
    import resource

    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def _wakeups() -> int:
    """Voluntary context switches (a process blocking to wait, then woken) of this process and
    its waited-for children: a count per step that does not move with the machine's load."""
    import resource

    return sum(r.ru_nvcsw for r in (resource.getrusage(resource.RUSAGE_SELF),
                                    resource.getrusage(resource.RUSAGE_CHILDREN)))


# =========================================================================== overhead worker
def overhead_worker(url: str, mode: str, tool: str) -> dict[str, Any]:
    from ahe.llm import make_client
    from ahe.llm.types import RoleConfig

    client = make_client("agent", RoleConfig(model="mock", base_url=url))
    tmp = Path(tempfile.mkdtemp(prefix=f"ahe-bench-confine-{os.getpid()}-"))

    async def main() -> dict[str, Any]:
        from ahe.confine.pool import WorkerPool

        sandbox = await _sandbox(tool, tmp)
        pool = WorkerPool(spares=1)
        pool.expect(1)
        try:
            tw = time.monotonic()  # the warm-up session: a cold start (nothing launched before)
            await _session(mode, tool, client, sandbox, tmp / "warmup", "WARMUP session: call your tool a few times, then stop.")
            worker = None
            if mode == "confined":  # the measured session takes a spare, as a trial does
                await (await pool.acquire(_workspace(tool), "bwrap")).close()  # launches the spare; this one is not used
                while not pool._idle.get(next(iter(pool._idle), None)):
                    await asyncio.sleep(0.01)
                await pool._idle[next(iter(pool._idle))][0]._connection()  # the spare is past its imports
            c0, t0, w0 = _rusage_cpu(), time.monotonic(), _wakeups()
            if mode == "confined":
                worker = await pool.acquire(_workspace(tool), "bwrap")
            res = await _session(mode, tool, client, sandbox, tmp / "trace", INSTRUCTION, worker=worker)
            t1, c1 = time.monotonic(), _rusage_cpu()  # children: the worker's jail, waited for at close
        finally:
            await pool.aclose()
            if sandbox is not None:
                await sandbox.stop()  # the sandbox's driver is a waited-for child too
        w1 = _wakeups()
        cpu = c1 - c0
        return {"ok": res.stop_reason.value == "no_tool_call", "t0": t0, "t1": t1, "t_warmup": tw, "cpu_sec": cpu,
                "turns": res.turns, "wakeups": w1 - w0,
                "info": f"{res.stop_reason.value} {res.detail or ''} turns={res.turns}"}

    try:
        return asyncio.run(main())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# =========================================================================== concurrency worker
def _tree_pss(pid: int) -> int:
    import psutil

    total = 0
    for c in psutil.Process(pid).children(recursive=True):
        try:
            total += c.memory_full_info().pss
        except psutil.Error:
            pass
    return total


def concurrency_worker(url: str, mode: str, sessions: int, calls: int) -> dict[str, Any]:
    import psutil

    from ahe.llm import make_client
    from ahe.llm.types import RoleConfig

    client = make_client("agent", RoleConfig(model="mock", base_url=url))
    tmp = Path(tempfile.mkdtemp(prefix=f"ahe-bench-confine-{os.getpid()}-"))
    me = psutil.Process()

    async def main() -> dict[str, Any]:
        from ahe.confine.host import ConfinedWorker

        await _session(mode, "noop", client, None, tmp / "warmup", "WARMUP session: call your tool a few times, then stop.")
        rss0 = me.memory_info().rss
        workers: list[Any] = [None] * sessions
        t_start = time.monotonic()
        if mode == "confined":
            workers = await asyncio.gather(*(ConfinedWorker.launch(_workspace("noop"), "bwrap") for _ in range(sessions)))
            await asyncio.gather(*(w._connection() for w in workers))  # imports done, waiting for the job
        start_sec = time.monotonic() - t_start
        peak = {"rss": 0, "pss": 0}
        stop = asyncio.Event()

        async def sample() -> None:
            while not stop.is_set():
                peak["rss"] = max(peak["rss"], me.memory_info().rss)
                peak["pss"] = max(peak["pss"], await asyncio.to_thread(_tree_pss, os.getpid()))
                await asyncio.sleep(1.0)

        sampler = asyncio.ensure_future(sample())
        import resource
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        c0, t0 = os.times(), time.monotonic()
        results = await asyncio.gather(*(_session(mode, "noop", client, None, tmp / f"s{i:03d}", f"{INSTRUCTION} session {i}",
                                                  worker=workers[i]) for i in range(sessions)), return_exceptions=True)
        t1 = time.monotonic()
        stop.set()
        await sampler
        c1 = os.times()
        ok = [r for r in results if not isinstance(r, BaseException) and r.stop_reason.value == "no_tool_call" and r.turns == calls]
        errors = [repr(r)[:300] if isinstance(r, BaseException) else f"{r.stop_reason.value}: {r.detail}" for r in results if r not in ok]
        return {"ok": not errors, "errors": errors[:3], "wall_sec": t1 - t0, "start_sec": start_sec,
                "cpu_sec": sum(getattr(c1, f) - getattr(c0, f) for f in ("user", "system", "children_user", "children_system")),
                "host_cpu_sec": sum(getattr(c1, f) - getattr(c0, f) for f in ("user", "system")),
                "host_nivcsw": resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw - r0.ru_nivcsw,
                "mem_per_session_mb": ((peak["rss"] - rss0) + peak["pss"]) / sessions / MB,
                "host_mb_per_session": (peak["rss"] - rss0) / sessions / MB, "jail_pss_mb_per_session": peak["pss"] / sessions / MB}

    try:
        return asyncio.run(main())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# =========================================================================== driver
def _child(args: list[str]) -> dict[str, Any]:
    p = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, timeout=1800, cwd=str(REPO))
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"ok": False, "error": (p.stderr or p.stdout)[-1500:]}
    return json.loads(lines[-1])


def run_overhead(calls: int, repeat: int) -> dict[str, Any]:
    configs = [(m, t) for t in ("noop", "shell") for m in ("inproc", "confined")]
    out: dict[str, Any] = {f"{m}|{t}": {"overhead": [], "start": [], "load": []} for m, t in configs}
    with MockProcess(step_policy(calls)) as mock:
        for r in range(repeat):
            for mode, tool in configs:
                mock.reset()
                load = os.getloadavg()[0]
                res = _child(["--worker", "overhead", "--mode", mode, "--tool", tool, "--url", mock.base_url])
                if not res.get("ok"):
                    print(f"{mode} {tool} failed: {res.get('error') or res.get('info')}", file=sys.stderr)
                    continue
                dump = mock.dump()
                an = analyse(dump, mock.base_url, calls)
                if not an["ok"]:
                    print(f"{mode} {tool}: {an['error']}", file=sys.stderr)
                    continue
                first = next(s["arrival"] for s in session_steps(dump) if not s["warmup"])
                first_cold = next(s["arrival"] for s in session_steps(dump) if s["warmup"])
                row = out[f"{mode}|{tool}"]
                row["overhead"].append(median(an["overhead"]))
                row["start"].append(first - res["t0"])
                row.setdefault("cold_start", []).append(first_cold - res["t_warmup"])
                row.setdefault("cpu_per_step", []).append(res["cpu_sec"] / max(1, res["turns"]))
                row.setdefault("wakeups_per_step", []).append(res["wakeups"] / max(1, res["turns"]))
                row["load"].append(load)
                print(f"  run {r + 1}/{repeat} {mode:<8} {tool:<5} overhead/step {ms(median(an['overhead']))} "
                      f"start {ms(first - res['t0'])} cold {ms(first_cold - res['t_warmup'])} (load {load:.1f})", flush=True)
    return out


def run_concurrency(levels: list[int], calls: int, latency: float) -> dict[str, Any]:
    out = {}
    with MockProcess(step_policy(calls, latency_sec=latency), log_requests=False) as mock:
        for m in levels:
            for mode in ("inproc", "confined"):
                load = os.getloadavg()[0]
                res = _child(["--worker", "concurrency", "--mode", mode, "--sessions", str(m), "--calls", str(calls),
                              "--url", mock.base_url])
                res["load"] = load
                if res.get("wall_sec"):
                    res["efficiency"] = calls * latency / res["wall_sec"]
                out[f"{mode}|{m}"] = res
                print(f"  M={m:<4} {mode:<8} wall {res.get('wall_sec', 0):6.2f} s  eff {res.get('efficiency', 0):.1%}  "
                      f"mem/session {res.get('mem_per_session_mb', 0):.1f} MB  start {res.get('start_sec', 0):.2f} s  "
                      f"(load {load:.1f}) {'' if res.get('ok') else res.get('errors') or res.get('error')}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=100, help="model calls per overhead session")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sessions", default="8,32,64,128", help="concurrency levels (comma list; 0 = skip)")
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="inproc", help=argparse.SUPPRESS)
    ap.add_argument("--tool", default="noop", help=argparse.SUPPRESS)
    ap.add_argument("--url", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker == "overhead":
        print(json.dumps(overhead_worker(args.url, args.mode, args.tool)))
        return
    if args.worker == "concurrency":
        print(json.dumps(concurrency_worker(args.url, args.mode, int(args.sessions), args.calls)))
        return
    data: dict[str, Any] = {"load_before": os.getloadavg()}
    if args.repeat > 0:
        data["overhead"] = ov = run_overhead(args.calls, args.repeat)
        rows = [[k.replace("|", " "), ms(median(v["overhead"])) if v["overhead"] else "-",
                 ms(median(v["start"])) if v["start"] else "-",
                 ms(median(v["cold_start"])) if v.get("cold_start") else "-",
                 ms(median(v["cpu_per_step"])) if v.get("cpu_per_step") else "-",
                 f"{median(v['wakeups_per_step']):.1f}" if v.get("wakeups_per_step") else "-",
                 f"{median(v['load']):.1f}" if v["load"] else "-"]
                for k, v in ov.items()]
        print(table(["configuration", "overhead/step ms", "session start ms", "cold start ms", "CPU/step ms",
                     "wakeups/step", "load"], rows,
                    "per step and session start (confined: start = from a spare worker, cold = nothing launched before)"))
    levels = [int(x) for x in args.sessions.split(",") if int(x) > 0]
    if levels:
        data["concurrency"] = cc = run_concurrency(levels, 20, args.latency)
        rows = [[k.replace("|", " M="), f"{v.get('wall_sec', 0):.2f}", f"{v.get('efficiency', 0):.1%}",
                 f"{v.get('mem_per_session_mb', 0):.1f}", f"{v.get('start_sec', 0):.2f}", f"{v['load']:.1f}"]
                for k, v in cc.items()]
        print(table(["configuration", "wall s", "efficiency", "MB/session", "start s", "load"], rows, "concurrency"))
    data["load_after"] = os.getloadavg()
    print(f"written: {write_result('confine', data, args.out)}")


if __name__ == "__main__":
    main()
