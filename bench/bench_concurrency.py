"""Benchmark 2 — concurrency: M sessions at once, 20 model calls each, 1 s of mock latency per call.

    python bench/bench_concurrency.py                          # M = 8, 32, 64, 128: AHE no-op and mini-swe-agent batch
    python bench/bench_concurrency.py --configs ahe-noop,ahe-shell --peers none   # AHE with the shell tool in bwrap too
    python bench/bench_concurrency.py --sessions 4 --latency 0.2 --configs ahe-noop --peers none   # smoke size

Each session makes 20 model calls (19 of them ask for one tool call, the last ends the
session), so a session cannot take less than 20 × latency: the ideal wall time is 20 s and
efficiency = ideal / measured wall time. Every M runs in a fresh worker process; the mock
server runs in its own process (log_requests off) and its CPU is reported apart.

Configurations:
  ahe-noop    AHE: M `Session`s on one asyncio loop, one shared model client, the no-op tool
              workspace (bench/workspaces/noop) — the harness alone.
  ahe-shell   AHE: the seed harness's shell tool, each session in its own persistent bwrap
              sandbox (started before the clock starts; their start-up is reported apart).
  mini        mini-swe-agent's batch mode: a ThreadPoolExecutor with M workers, one
              DefaultAgent + LitellmModel per session (what `mini-extra swebench -w M` does),
              with the in-process no-op environment.

Measured per M: wall time of the sessions, efficiency, CPU seconds of the worker process
tree per session (user+sys), and peak memory per session: the harness process's resident
memory growth from before the sessions to its peak, and for the shell configuration also
the sandboxes' proportional set size (PSS, so shared pages are not counted M times).
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
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    BENCH, INSTRUCTION, REPO, WARMUP_INSTRUCTION, MockProcess, median, parse_peers, peer_python, peer_versions, step_policy,
    table, write_result,
)

CALLS = 20
MB = 1024 * 1024


# =========================================================================== AHE worker
def ahe_worker(url: str, tool: str, sessions: int, calls: int) -> dict[str, Any]:
    from ahe.llm import make_client
    from ahe.llm.types import RoleConfig
    from ahe.runtime import Session, load_agent

    ws = BENCH / "workspaces" / "noop" if tool == "noop" else REPO / "harness_workspace"
    agent = load_agent(ws)
    client = make_client("agent", RoleConfig(model="mock", base_url=url))
    tmp = Path(tempfile.mkdtemp(prefix=f"ahe-bench-conc-{os.getpid()}-"))  # pid-named: swept after a kill

    async def main() -> dict[str, Any]:
        sandboxes: list[Any] = [None] * sessions
        t_sb = 0.0
        if tool == "shell":
            from ahe.sandbox.local import LocalSandbox

            t = time.monotonic()
            sandboxes = [LocalSandbox(tmp / f"s{i:03d}" / "app", root_dir=tmp / f"s{i:03d}" / "sandbox", isolation="bwrap")
                         for i in range(sessions)]
            await asyncio.gather(*(sb.start() for sb in sandboxes))
            t_sb = time.monotonic() - t
        await Session(agent, client, sandbox=sandboxes[0], trace_dir=tmp / "warmup").run(WARMUP_INSTRUCTION)
        loop = asyncio.get_running_loop()
        print(json.dumps({"ready": True, "sandbox_start_sec": t_sb}), flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)  # the parent samples, then says go
        c0, t0 = os.times(), time.monotonic()

        async def one(i: int) -> Any:
            return await Session(agent, client, sandbox=sandboxes[i], trace_dir=tmp / f"s{i:03d}" / "trace").run(
                f"{INSTRUCTION} session {i}")

        results = await asyncio.gather(*(one(i) for i in range(sessions)), return_exceptions=True)
        t1 = time.monotonic()
        for sb in sandboxes:  # stopped before the CPU is read: their processes' CPU is then counted
            if sb is not None:
                await sb.stop()
        c1 = os.times()
        ok = [r for r in results if not isinstance(r, BaseException) and r.stop_reason.value == "no_tool_call" and r.turns == calls]
        errors = [repr(r)[:300] if isinstance(r, BaseException) else f"{r.stop_reason.value}: {r.detail}"
                  for r in results if r not in ok]
        return {"ok": not errors, "wall_sec": t1 - t0, "cpu_sec": sum(getattr(c1, f) - getattr(c0, f) for f in ("user", "system", "children_user", "children_system")),
                "sessions_done": len(ok), "calls": sum(r.turns for r in ok), "errors": errors[:5],
                "session_sec": [r.duration_sec for r in ok]}

    try:
        return asyncio.run(main())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # a benchmark leaves nothing in /tmp


# =========================================================================== sampling
class TreeSampler(threading.Thread):
    """Samples the RSS of a process and the PSS of its descendants every `interval` seconds."""

    def __init__(self, pid: int, interval: float = 0.25, pss: bool = False) -> None:
        super().__init__(daemon=True)
        import psutil

        self.proc = psutil.Process(pid)
        self.interval = interval
        self.pss = pss
        self.stop_evt = threading.Event()
        self.peak_main = 0
        self.peak_children = 0
        self.samples = 0

    def sample(self) -> tuple[int, int]:
        import psutil

        try:
            main = self.proc.memory_info().rss
        except psutil.Error:
            return 0, 0
        kids = 0
        if self.pss:
            for c in self.proc.children(recursive=True):
                try:
                    kids += c.memory_full_info().pss
                except psutil.Error:
                    pass
        return main, kids

    def run(self) -> None:
        while not self.stop_evt.is_set():
            m, k = self.sample()
            self.peak_main = max(self.peak_main, m)
            self.peak_children = max(self.peak_children, k)
            self.samples += 1
            self.stop_evt.wait(self.interval)

    def stop(self) -> None:
        self.stop_evt.set()
        self.join()


def run_config(config: str, url: str, sessions: int, calls: int) -> dict[str, Any]:
    if config.startswith("ahe-"):
        cmd = [sys.executable, __file__, "--worker", "--tool", config[4:], "--url", url, "--sessions", str(sessions),
               "--calls", str(calls)]
    else:
        cmd = [str(peer_python()), str(BENCH / "peers" / "peer_runner.py"), "concurrency", "--peer", "mini", "--env", "noop",
               "--url", url, "--sessions", str(sessions), "--calls", str(calls)]
    # stderr to a file, not a pipe: a chatty worker (litellm) would fill a pipe read only at the end and stall
    with tempfile.TemporaryFile("w+") as errf:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf, text=True, cwd=str(REPO))
        try:
            return _drive(p, config, sessions, errf)
        finally:
            if p.poll() is None:
                p.kill()
            p.wait()


def _failure(p: subprocess.Popen, what: str, line: str, errf: Any) -> dict[str, Any]:
    """Why a worker failed, in words: what it printed instead of JSON, its exit code, its stderr's tail."""
    try:
        code = p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        code = "none (killed)"
    errf.seek(0)
    tail = errf.read()[-1500:].strip()
    shown = f"printed {line.strip()[:300]!r}" if line.strip() else "printed nothing"
    return {"ok": False, "error": f"{what}: the worker {shown} instead of a JSON line, exit code {code}; "
                                  f"stderr tail: {tail or '(empty)'}"}


def _drive(p: subprocess.Popen, config: str, sessions: int, errf: Any) -> dict[str, Any]:
    ready = p.stdout.readline()
    if not ready.startswith("{"):
        return _failure(p, "no ready line", ready, errf)
    info = json.loads(ready)
    sampler = TreeSampler(p.pid, pss=config == "ahe-shell")
    base_main, base_kids = sampler.sample()
    sampler.start()
    p.stdin.write("go\n")
    p.stdin.flush()
    out = p.stdout.readline()
    sampler.stop()
    if not out.startswith("{"):
        return _failure(p, "no result line", out, errf)
    p.wait()
    res = json.loads(out)
    res.update({
        "rss_base_mb": base_main / MB, "rss_peak_mb": sampler.peak_main / MB,
        "harness_mb_per_session": (sampler.peak_main - base_main) / MB / sessions,
        "sandbox_pss_mb_per_session": (base_kids / MB / sessions) if config == "ahe-shell" else None,
        "sandbox_start_sec": info.get("sandbox_start_sec"),
        "samples": sampler.samples,
    })
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", default="8,32,64,128", help="comma list of M")
    ap.add_argument("--configs", default="ahe-noop", help="AHE configurations, comma list: ahe-noop, ahe-shell")
    ap.add_argument("--peers", default="mini", help="'mini' (its batch mode) or 'none'")
    ap.add_argument("--latency", type=float, default=1.0, help="mock latency per call, seconds")
    ap.add_argument("--calls", type=int, default=CALLS)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tool", default="noop", help=argparse.SUPPRESS)
    ap.add_argument("--url", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(ahe_worker(args.url, args.tool, int(args.sessions), args.calls)), flush=True)
        return

    ms_list = [int(x) for x in args.sessions.split(",")]
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    notes = []
    py = peer_python()
    if parse_peers(args.peers, ["mini"], ap):
        if py is None:
            notes.append("mini-swe-agent skipped: no peer virtualenv (run bench/setup_peers.sh)")
        else:
            configs.append("mini")
    ideal = args.calls * args.latency
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    with MockProcess(step_policy(args.calls, latency_sec=args.latency), log_requests=False) as mock:
        for r in range(args.repeat):
            for m in ms_list:
                for cfg in configs:
                    cpu0 = mock.cpu_seconds()
                    res = run_config(cfg, mock.base_url, m, args.calls)
                    res["mock_cpu_sec"] = mock.cpu_seconds() - cpu0
                    runs.setdefault((cfg, m), []).append(res)
                    if res.get("ok"):
                        print(f"  run {r + 1}/{args.repeat} {cfg:<9} M={m:<4} wall {res['wall_sec']:.2f}s "
                              f"efficiency {100 * ideal / res['wall_sec']:.1f}%", file=sys.stderr, flush=True)
                    else:
                        why = res.get("error") or "; ".join(res.get("errors") or []) or "the worker reported ok: false with no reason"
                        print(f"  run {r + 1}/{args.repeat} {cfg:<9} M={m:<4} FAILED: {why}",
                              file=sys.stderr, flush=True)

    summary = []
    rows = []
    for cfg in configs:
        for m in ms_list:
            good = [x for x in runs.get((cfg, m), []) if x.get("ok")]
            row: dict[str, Any] = {"config": cfg, "sessions": m, "runs": len(good)}
            if good:
                wall = median(x["wall_sec"] for x in good)
                row.update({
                    "wall_sec": wall, "ideal_sec": ideal, "efficiency": ideal / wall,
                    "cpu_ms_per_session": median(1000 * x["cpu_sec"] / m for x in good),
                    "harness_mb_per_session": median(x["harness_mb_per_session"] for x in good),
                    "sandbox_pss_mb_per_session": median(x["sandbox_pss_mb_per_session"] for x in good)
                    if cfg == "ahe-shell" else None,
                    "rss_peak_mb": median(x["rss_peak_mb"] for x in good),
                    "mock_cpu_sec": median(x["mock_cpu_sec"] for x in good),
                    "sandbox_start_sec": median(x["sandbox_start_sec"] for x in good) if cfg == "ahe-shell" else None,
                    "walls": [x["wall_sec"] for x in good],
                })
                sb = row["sandbox_pss_mb_per_session"]
                rows.append([cfg, m, f"{wall:.2f}", f"{100 * row['efficiency']:.1f}%", f"{row['cpu_ms_per_session']:.0f}",
                             f"{row['harness_mb_per_session']:.2f}", f"{sb:.1f}" if sb is not None else "-",
                             f"{row['rss_peak_mb']:.0f}", f"{row['mock_cpu_sec']:.1f}"])
            else:
                row["errors"] = [x.get("error") or x.get("errors") for x in runs.get((cfg, m), [])]
                rows.append([cfg, m, "failed", "", "", "", "", "", ""])
            summary.append(row)
    print(table(["config", "M", "wall s", "efficiency", "CPU ms/session", "harness MB/session", "sandbox PSS MB/session",
                 "peak RSS MB", "mock CPU s"], rows,
                title=f"Concurrency — {args.calls} calls per session, {args.latency:g} s mock latency, ideal {ideal:g} s, "
                      f"median of {args.repeat} run(s)"))
    for n in notes:
        print(n)
    data = {"calls": args.calls, "latency_sec": args.latency, "repeat": args.repeat, "results": summary, "notes": notes,
            "peer_versions": peer_versions(py) if ("mini" in configs and py) else {}}
    path = write_result("concurrency", data, args.out)
    print(f"\nwritten: {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


if __name__ == "__main__":
    main()
