"""Benchmark 1 — harness overhead per step, AHE side by side with peer harnesses.

    python bench/bench_overhead.py                 # default: 100 model calls per session, 3 repeats
    python bench/bench_overhead.py --calls 20 --repeat 1 --peers none     # smoke size

One session = `calls` model calls; every call but the last asks for one tool call (the same
`echo step N` command for every harness); the mock model answers at once (latency 0). The
mock server runs in its own process. Per step (model call i → model call i+1) we take:

  step      the interval between the policy's answers to request i and request i+1, seen by
            the server (so no instrumentation inside the harness is needed);
  floor     the median of 5 raw HTTP round trips (stdlib http.client, keep-alive) of the same
            request body i to the same server: the mock's own work plus the loopback;
  overhead  step − floor: everything the harness adds (client library, loop, tool dispatch,
            sandbox, trace writing).

Configurations (each in a fresh process, interleaved per repeat, same server):
  (a) no-op tool  AHE: bench/workspaces/noop (the seed harness with an in-process async no-op
                  tool); mini-swe-agent with an in-process no-op environment; openai-agents
                  and smolagents with a no-op function tool.
  (b) shell       AHE: the seed harness_workspace's run_shell_command in the local bwrap
                  sandbox (one persistent jail per session); mini-swe-agent with its
                  LocalEnvironment (subprocess per command, no isolation) and its
                  BubblewrapEnvironment (a new bwrap jail per command).

A second, instrumented run per harness splits the step into model client, dispatch,
tool/sandbox, trace writing and the rest of the loop (exclusive times; the instrumentation
adds a few microseconds per step, shown as the difference of its total).
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
from _common import (  # noqa: E402
    BENCH, INSTRUCTION, REPO, WARMUP_INSTRUCTION, MockProcess, median, ms, pct, peer_python, peer_versions,
    parse_peers, replay_floor, self_cpu, session_steps, step_policy, table, tree_cpu, write_result,
)

# (label, harness, tool/env, kind)
AHE_CONFIGS = [("AHE", "ahe", "noop", "a"), ("AHE", "ahe", "shell", "b")]
PEER_CONFIGS = {
    "mini": [("mini-swe-agent", "mini", "noop", "a"), ("mini-swe-agent (local)", "mini", "local", "b"),
             ("mini-swe-agent (bwrap)", "mini", "bwrap", "b")],
    "openai-agents": [("openai-agents", "openai-agents", "noop", "a")],
    "smolagents": [("smolagents", "smolagents", "noop", "a")],
}
CATS = ["model_client", "dispatch", "tool", "sandbox", "trace", "loop"]


# =========================================================================== AHE worker
class Prof:
    """Exclusive wall time per category, per step (step = number of model calls started)."""

    def __init__(self) -> None:
        self.step = 0
        self.stack: list[list[float]] = []
        self.rows: dict[int, dict[str, float]] = {}
        self.call_starts: list[float] = []

    def _enter(self, counts_step: bool) -> float:
        if counts_step:
            self.step += 1
            self.call_starts.append(time.monotonic())
        self.stack.append([0.0])
        return time.perf_counter()

    def _exit(self, t0: float, cat: str) -> None:
        el = time.perf_counter() - t0
        child = self.stack.pop()[0]
        if self.stack:
            self.stack[-1][0] += el
        row = self.rows.setdefault(self.step, {})
        row[cat] = row.get(cat, 0.0) + el - child

    def wrap(self, fn, cat: str, counts_step: bool = False):
        prof = self
        if asyncio.iscoroutinefunction(fn):
            async def awrapper(*a, **k):
                t0 = prof._enter(counts_step)
                try:
                    return await fn(*a, **k)
                finally:
                    prof._exit(t0, cat)
            return awrapper

        def wrapper(*a, **k):
            t0 = prof._enter(counts_step)
            try:
                return fn(*a, **k)
            finally:
                prof._exit(t0, cat)
        return wrapper


def _instrument(prof: Prof, agent: Any, client: Any, sandbox: Any) -> None:
    from ahe.runtime import session as session_mod
    from ahe.runtime import tools as tools_mod
    from ahe.runtime import trace as trace_mod

    client.complete = prof.wrap(client.complete, "model_client", counts_step=True)
    S = session_mod.Session
    S.execute_tool_call = prof.wrap(S.execute_tool_call, "dispatch")
    tools_mod.Tool.call = prof.wrap(tools_mod.Tool.call, "dispatch")
    for tool in agent.tools.values():
        tool.function = prof.wrap(tool.function, "tool")
    T = trace_mod.TrajectoryWriter
    T.add_step = prof.wrap(T.add_step, "trace")
    T.update_last_step = prof.wrap(T.update_last_step, "trace")
    T.finish = prof.wrap(T.finish, "trace")
    trace_mod.EventLog.emit = prof.wrap(trace_mod.EventLog.emit, "trace")
    if sandbox is not None:
        sandbox.exec = prof.wrap(sandbox.exec, "sandbox")


def ahe_worker(url: str, tool: str, calls: int, instrument: bool) -> dict[str, Any]:
    from ahe.llm import make_client
    from ahe.llm.types import RoleConfig
    from ahe.runtime import Session, load_agent

    ws = BENCH / "workspaces" / "noop" if tool == "noop" else REPO / "harness_workspace"
    agent = load_agent(ws)
    client = make_client("agent", RoleConfig(model="mock", base_url=url))
    tmp = Path(tempfile.mkdtemp(prefix=f"ahe-bench-overhead-{os.getpid()}-"))

    async def main() -> dict[str, Any]:
        sandbox = None
        if tool.startswith("shell"):
            from ahe.sandbox import local

            if tool == "shell-baseline":  # another driver source (--baseline-driver), read at start()
                local._DRIVER_PATH = Path(os.environ["AHE_BENCH_BASELINE_DRIVER"])
            sandbox = local.LocalSandbox(tmp / "app", root_dir=tmp / "sandbox", isolation="bwrap")
            await sandbox.start()
        prof = Prof() if instrument else None
        try:
            if prof is not None:
                _instrument(prof, agent, client, sandbox)
            await Session(agent, client, sandbox=sandbox, trace_dir=tmp / "warmup").run(WARMUP_INSTRUCTION)
            if prof is not None:
                prof.__init__()
            box_pid = sandbox._proc.pid if sandbox is not None else None
            c0, k0 = self_cpu(), tree_cpu(box_pid) if box_pid else 0.0
            t0 = time.monotonic()
            res = await Session(agent, client, sandbox=sandbox, trace_dir=tmp / "trace").run(INSTRUCTION)
            t1 = time.monotonic()
            cpu = self_cpu() - c0 + (tree_cpu(box_pid) - k0 if box_pid else 0.0)
        finally:
            if sandbox is not None:
                await sandbox.stop()
        out: dict[str, Any] = {"ok": res.stop_reason.value == "no_tool_call" and res.turns == calls, "t0": t0, "t1": t1,
                               "cpu_sec": cpu,
                               "info": {"stop_reason": res.stop_reason.value, "turns": res.turns, "tool_errors": res.tool_errors}}
        if prof is not None:
            out["prof"] = {"rows": {str(k): v for k, v in prof.rows.items()}, "call_starts": prof.call_starts}
        return out

    try:
        return asyncio.run(main())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # a benchmark leaves nothing in /tmp


def ahe_stub_worker(calls: int, sessions: int = 7) -> dict[str, Any]:
    """The runtime alone: the no-op workspace driven by an in-process stub model (no HTTP, no
    JSON), so what remains is the loop, dispatch, trace writing, session start and finish."""
    from ahe.llm.types import ModelResponse, ToolCall, Usage
    from ahe.runtime import Session, load_agent

    agent = load_agent(BENCH / "workspaces" / "noop")
    tmp = Path(tempfile.mkdtemp(prefix=f"ahe-bench-stub-{os.getpid()}-"))

    class StubClient:
        model = "stub"

        async def complete(self, messages, *, tools=None, settings=None, on_event=None):  # noqa: ANN001
            turn = sum(1 for m in messages if m["role"] == "assistant") + 1
            if turn >= calls:
                return ModelResponse(content="Done.", tool_calls=[], finish_reason="stop", model="stub",
                                     usage=Usage(prompt_tokens=100 * turn, completion_tokens=2), latency_sec=0.0, attempts=1)
            args = {"command": f"echo step {turn}"}
            return ModelResponse(content=None, tool_calls=[ToolCall(id=f"call_{turn}_0", name="noop", raw_arguments=json.dumps(args),
                                                                    arguments=args)],
                                 finish_reason="tool_calls", model="stub", usage=Usage(prompt_tokens=100 * turn, completion_tokens=10),
                                 latency_sec=0.0, attempts=1)

    async def main() -> list[float]:
        out = []
        for i in range(sessions + 1):
            t0 = time.perf_counter()
            res = await Session(agent, StubClient(), trace_dir=tmp / f"s{i}").run(INSTRUCTION)
            if i:  # the first is a warm-up
                out.append((time.perf_counter() - t0) / res.turns)
        return out

    try:
        per_step = asyncio.run(main())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"ok": True, "per_step_sec": per_step}


# =========================================================================== orchestration
def run_one(cfg: tuple[str, str, str, str], url: str, calls: int, instrument: bool) -> dict[str, Any]:
    label, harness, tool, kind = cfg
    if harness == "ahe":
        cmd = [sys.executable, __file__, "--worker", "--tool", tool, "--url", url, "--calls", str(calls)]
    else:
        cmd = [str(peer_python()), str(BENCH / "peers" / "peer_runner.py"), "overhead", "--peer", harness,
               "--env", tool, "--url", url, "--calls", str(calls)]
    if instrument:
        cmd.append("--instrument")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=str(REPO))
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"ok": False, "error": (p.stderr or p.stdout)[-2000:]}
    return json.loads(lines[-1])


def analyse(dump: dict[str, Any], url: str, calls: int) -> dict[str, Any]:
    steps = [s for s in session_steps(dump) if not s["warmup"]]
    bodies = [b for b, s in zip(dump["requests"], session_steps(dump)) if not s["warmup"]]
    if len(steps) != calls:
        return {"ok": False, "error": f"{len(steps)} model calls seen by the mock, expected {calls}"}
    floors = replay_floor(url, bodies)
    intervals = [steps[i + 1]["arrival"] - steps[i]["arrival"] for i in range(len(steps) - 1)]
    overhead = [iv - fl for iv, fl in zip(intervals, floors)]
    return {"ok": True, "step": intervals, "floor": floors[:-1], "floor_all_sec": sum(floors), "overhead": overhead,
            "request_bytes_last": steps[-1]["bytes"]}


def split_from_prof(prof: dict[str, Any], floors: list[float]) -> dict[str, float]:
    """Median per category over steps 1..n-1; model_client has the mock's floor taken out."""
    starts = prof["call_starts"]
    rows = prof["rows"]
    per_cat: dict[str, list[float]] = {c: [] for c in CATS + ["total"]}
    for i in range(1, len(starts)):
        row = rows.get(str(i), {})
        total = starts[i] - starts[i - 1]
        fl = floors[i - 1] if i - 1 < len(floors) else 0.0
        vals = {c: row.get(c, 0.0) for c in CATS if c != "loop"}
        vals["model_client"] = max(0.0, vals["model_client"] - fl)
        vals["loop"] = max(0.0, total - fl - sum(vals.values()))
        for c in CATS:
            per_cat[c].append(vals[c])
        per_cat["total"].append(total - fl)
    return {c: median(v) for c, v in per_cat.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=100, help="model calls per session (default 100 = the seed's max_turns)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per configuration; medians over runs are reported")
    ap.add_argument("--peers", default="mini,openai-agents,smolagents", help="comma list, or 'none'")
    ap.add_argument("--no-shell", action="store_true", help="skip the (b) shell configurations")
    ap.add_argument("--shell-only", action="store_true", help="only the (b) shell configurations")
    ap.add_argument("--baseline-driver", type=Path, default=None,
                    help="also run AHE's shell step with this local_driver.py source (e.g. from `git show REV:...`)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tool", default="noop", help=argparse.SUPPRESS)
    ap.add_argument("--url", default="", help=argparse.SUPPRESS)
    ap.add_argument("--instrument", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        if args.tool == "stub":
            print(json.dumps(ahe_stub_worker(args.calls)))
        else:
            print(json.dumps(ahe_worker(args.url, args.tool, args.calls, args.instrument)))
        return

    configs = list(AHE_CONFIGS)
    if args.baseline_driver is not None:
        if not args.baseline_driver.is_file():
            ap.error(f"--baseline-driver {args.baseline_driver} is not a file; write one with "
                     "`git show <rev>:ahe/sandbox/local_driver.py > FILE`")
        os.environ["AHE_BENCH_BASELINE_DRIVER"] = str(args.baseline_driver.resolve())
        configs.append(("AHE (baseline driver)", "ahe", "shell-baseline", "b"))
    py = peer_python()
    peers = parse_peers(args.peers, PEER_CONFIGS, ap)
    notes = []
    if peers and py is None:
        notes.append("peers skipped: no peer virtualenv (run bench/setup_peers.sh)")
        peers = []
    for p in peers:
        configs += PEER_CONFIGS[p]
    if args.no_shell:
        configs = [c for c in configs if c[3] == "a"]
    if args.shell_only:
        configs = [c for c in configs if c[3] == "b"]

    runs: dict[str, list[dict[str, Any]]] = {}
    splits: dict[str, dict[str, float]] = {}
    with MockProcess(step_policy(args.calls)) as mock:
        for r in range(args.repeat + 1):  # the last round is the instrumented one
            instrument = r == args.repeat
            for cfg in configs:
                key = f"{cfg[0]}|{cfg[2]}"
                mock.reset()
                load = os.getloadavg()[0]
                res = run_one(cfg, mock.base_url, args.calls, instrument)
                if not res.get("ok"):
                    print(f"{cfg[0]} [{cfg[2]}] failed: {res.get('error') or res.get('info')}", file=sys.stderr)
                    runs.setdefault(key, []).append({"ok": False, "error": res.get("error") or str(res.get("info"))})
                    continue
                an = analyse(mock.dump(), mock.base_url, args.calls)
                if not an["ok"]:
                    print(f"{cfg[0]} [{cfg[2]}]: {an['error']}", file=sys.stderr)
                    runs.setdefault(key, []).append(an)
                    continue
                if instrument:
                    splits[key] = split_from_prof(res["prof"], an["floor"]) if res.get("prof", {}).get("call_starts") else {}
                else:
                    wall = res["t1"] - res["t0"]
                    cpu = res.get("cpu_sec")
                    runs.setdefault(key, []).append({**an, "session_wall_sec": wall, "load": load,
                                                     "cpu_per_call": cpu / args.calls if cpu is not None else None,
                                                     "amortized": (wall - an["floor_all_sec"]) / args.calls})
                    print(f"  run {r + 1}/{args.repeat} {cfg[0]:<26} [{cfg[2]:<5}] overhead median "
                          f"{ms(pct(an['overhead'], 50))} ms, p90 {ms(pct(an['overhead'], 90))} ms (load {load:.1f})",
                          file=sys.stderr, flush=True)

    stub: list[float] = []
    for _ in range(args.repeat):
        p = subprocess.run([sys.executable, __file__, "--worker", "--tool", "stub", "--calls", str(args.calls)],
                           capture_output=True, text=True, timeout=600, cwd=str(REPO))
        if p.returncode == 0:
            stub.append(median(json.loads(p.stdout.splitlines()[-1])["per_step_sec"]))
    summary = []
    for cfg in configs:
        key = f"{cfg[0]}|{cfg[2]}"
        good = [x for x in runs.get(key, []) if x.get("ok")]
        row = {"label": cfg[0], "tool": cfg[2], "kind": cfg[3], "runs": len(good)}
        if good:
            row.update({
                "overhead_median": median(pct(x["overhead"], 50) for x in good),
                "overhead_p90": median(pct(x["overhead"], 90) for x in good),
                "overhead_p95": median(pct(x["overhead"], 95) for x in good),
                "cpu_per_call": median(x["cpu_per_call"] for x in good) if all(x.get("cpu_per_call") is not None for x in good) else None,
                "load_range": [min(x["load"] for x in good), max(x["load"] for x in good)],
                "step_median": median(pct(x["step"], 50) for x in good),
                "floor_median": median(pct(x["floor"], 50) for x in good),
                "session_wall_sec": median(x["session_wall_sec"] for x in good),
                "amortized_median": median(x["amortized"] for x in good),
                "overhead_medians_per_run": [pct(x["overhead"], 50) for x in good],
            })
        row["split"] = splits.get(key, {})
        summary.append(row)

    ahe = {r["kind"]: r for r in summary if r["label"] == "AHE" and "overhead_median" in r}
    for r in summary:
        base = ahe.get(r["kind"])
        if base and "overhead_median" in r and r["label"] != "AHE":
            r["ratio_vs_ahe"] = r["overhead_median"] / base["overhead_median"]
            if r.get("cpu_per_call") and base.get("cpu_per_call"):
                r["ratio_cpu_vs_ahe"] = r["cpu_per_call"] / base["cpu_per_call"]

    rows = []
    for r in summary:
        if "overhead_median" not in r:
            rows.append([r["label"], r["tool"], "failed"] + [""] * 10)
            continue
        rows.append([r["label"], r["tool"], ms(r["overhead_median"]), ms(r["overhead_p90"]), ms(r["overhead_p95"]),
                     ms(r["step_median"]), ms(r["floor_median"]), ms(r["amortized_median"]),
                     ms(r["cpu_per_call"]) if r["cpu_per_call"] is not None else "-", f"{r['session_wall_sec']:.2f}",
                     f"{r['ratio_vs_ahe']:.1f}x" if "ratio_vs_ahe" in r else "-",
                     f"{r['ratio_cpu_vs_ahe']:.1f}x" if "ratio_cpu_vs_ahe" in r else "-",
                     "{:.1f}–{:.1f}".format(*r["load_range"])])
    print(table(["harness", "tool", "overhead ms (median)", "p90", "p95", "step ms", "mock floor ms", "amortized ms",
                 "CPU ms/call", "session s", "vs AHE", "CPU vs AHE", "load"],
                rows, title=f"Harness overhead per step — {args.calls} model calls per session, median of {args.repeat} runs"))
    srows = []
    for r in summary:
        s = r["split"]
        if s:
            srows.append([r["label"], r["tool"]] + [ms(s.get(c, float("nan"))) for c in CATS] + [ms(s.get("total", float("nan")))])
    if srows:
        print()
        print(table(["harness", "tool", "model client", "dispatch", "tool", "sandbox", "trace", "loop/rest", "total (instr.)"],
                    srows, title="Split of the overhead per step (ms, medians over the steps of one instrumented run)"))
    if stub:
        print(f"\nAHE runtime alone (no-op tool, in-process stub model: no HTTP, no JSON), session start and finish "
              f"included: {ms(median(stub))} ms per step (median of {len(stub)} processes)")
    for n in notes:
        print(n)
    data = {"calls": args.calls, "repeat": args.repeat, "configs": summary, "notes": notes,
            "runtime_alone_ms_per_step": median(stub) * 1000 if stub else None,
            "peer_versions": peer_versions(py) if (peers and py) else {}}
    path = write_result("overhead", data, args.out)
    print(f"\nwritten: {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


if __name__ == "__main__":
    main()
