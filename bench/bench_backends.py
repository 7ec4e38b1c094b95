"""Benchmark — per-step overhead of the mini-swe-agent backend, side by side with mini-swe-agent run directly.

    python bench/bench_backends.py                         # 50 calls, 3 repeats, both shells
    python bench/bench_backends.py --calls 20 --repeat 1   # smoke size

The same scripted mock server (its own process, real HTTP) answers both, with the same policy
(bench/_common.step_policy: `calls` model calls, each but the last one bash command, then mini's
submit command), on mini's own mini.yaml:

  direct   mini-swe-agent's DefaultAgent + LitellmModel in one process (bench/peers/peer_runner.py,
           run by the peers' Python: $AHE_BENCH_PEER_PYTHON, the peer venv, or this Python when
           it has mini-swe-agent installed).
  backend  AHE's `mini-swe-agent` backend: mini's loop in a confined bwrap worker, every model
           call through the gateway (openai SDK on the host), every command through the
           worker's socket into the trial's sandbox (MiniBackend.run, as a trial calls it).

Shells, the same work on both sides: `local` — a plain subprocess per command (mini's
LocalEnvironment; AHE's local sandbox with isolation none); `bwrap` — a bubblewrap jail per
command (mini's BubblewrapEnvironment; AHE's local sandbox with isolation bwrap).
Per step, overhead = the interval between two model requests seen by the mock minus the raw
HTTP round trip of the same request (bench_overhead.analyse); the ratio is backend / direct.
Each run is a fresh process, the configurations interleaved per repeat.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
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
    BENCH, INSTRUCTION, REPO, WARMUP_INSTRUCTION, MockProcess, median, ms, peer_python, step_policy, table, write_result,
)
from bench_overhead import analyse  # noqa: E402

SHELLS = ("local", "bwrap")


def _mini_python() -> Path | None:
    p = peer_python()
    if p is not None:
        return p
    return Path(sys.executable) if importlib.util.find_spec("minisweagent") else None


def _harness(folder: Path, calls: int) -> Path:
    """mini's own mini.yaml with the peer runner's limits (step_limit calls+5, no cost limit)."""
    import yaml

    spec = importlib.util.find_spec("minisweagent")
    cfg = yaml.safe_load((Path(next(iter(spec.submodule_search_locations))) / "config" / "mini.yaml").read_text())
    cfg["agent"].update(step_limit=calls + 5, cost_limit=0)
    cfg["model"]["model_kwargs"] = {**cfg["model"].get("model_kwargs", {}), "temperature": 0.7, "max_tokens": 16000}
    folder.mkdir(parents=True)
    (folder / "mini.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    (folder / "harness.yaml").write_text("backend: mini-swe-agent\nconfig: mini.yaml\n")
    return folder


def backend_worker(url: str, shell: str, calls: int) -> dict[str, Any]:
    """One warm-up session, then the measured one, through MiniBackend.run (a fresh sandbox each)."""
    from ahe.agents import AgentRequest
    from ahe.agents.mini_backend import MiniBackend
    from ahe.llm import make_client
    from ahe.llm.types import RoleConfig
    from ahe.sandbox.local import LocalSandbox

    client = make_client("agent", RoleConfig(model="mock", base_url=url))
    tmp = Path(tempfile.mkdtemp(prefix=f"ahe-bench-backends-{os.getpid()}-"))
    harness = _harness(tmp / "harness", calls)

    async def session(name: str, instruction: str) -> Any:
        backend = MiniBackend()
        sandbox = LocalSandbox(tmp / name / "app", root_dir=tmp / name / "sandbox",
                               isolation="none" if shell == "local" else "bwrap")
        (tmp / name / "app").mkdir(parents=True)
        await sandbox.start()
        try:
            warm = await backend.warm(harness, "bwrap")
            c0, t0 = _rusage_cpu(), time.monotonic()
            res = await backend.run(AgentRequest(harness=harness, instruction=instruction, trace_dir=tmp / name / "trial",
                                                 client=client, sandbox=sandbox, isolation="bwrap", warm=warm))
            return res, t0, time.monotonic(), _rusage_cpu() - c0  # children: the jail (waited at close), commands
        finally:
            await sandbox.stop()
            await backend.aclose()

    async def main() -> dict[str, Any]:
        await session("warmup", WARMUP_INSTRUCTION)
        res, t0, t1, cpu = await session("run", INSTRUCTION)
        return {"ok": res.stop_reason.value == "stop_tool" and res.turns == calls, "t0": t0, "t1": t1, "cpu_sec": cpu,
                "info": f"{res.stop_reason.value} {res.detail or ''} turns={res.turns}"}

    try:
        return asyncio.run(main())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _rusage_cpu() -> float:
    """User+system CPU of this process and its waited-for children."""
    import resource

    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def _run(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=str(REPO), env=env)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"ok": False, "error": (p.stderr or p.stdout)[-1500:]}
    return json.loads(lines[-1])


def run(calls: int, repeat: int, shells: list[str], py: Path) -> dict[str, Any]:
    out: dict[str, Any] = {f"{side}|{shell}": {"overhead": [], "step": [], "cpu": [], "load": []}
                           for shell in shells for side in ("direct", "backend")}
    with MockProcess(step_policy(calls)) as mock:
        for r in range(repeat):
            for shell in shells:
                for side in ("direct", "backend"):
                    mock.reset()
                    load = os.getloadavg()[0]
                    if side == "direct":
                        res = _run([str(py), str(BENCH / "peers" / "peer_runner.py"), "overhead", "--peer", "mini",
                                    "--env", shell, "--url", mock.base_url, "--calls", str(calls)])
                    else:
                        res = _run([sys.executable, __file__, "--worker", shell, "--url", mock.base_url,
                                    "--calls", str(calls)], env=dict(os.environ, PYTHONPATH=str(REPO)))
                    if not res.get("ok"):
                        print(f"{side} {shell} failed: {res.get('error') or res.get('info')}", file=sys.stderr)
                        continue
                    an = analyse(mock.dump(), mock.base_url, calls)
                    if not an["ok"]:
                        print(f"{side} {shell}: {an['error']}", file=sys.stderr)
                        continue
                    row = out[f"{side}|{shell}"]
                    row["overhead"].append(median(an["overhead"]))
                    row["step"].append(median(an["step"]))
                    row["cpu"].append(res["cpu_sec"] / calls)
                    row["load"].append(load)
                    print(f"  run {r + 1}/{repeat} {side:<7} {shell:<5} step {ms(median(an['step']))} "
                          f"overhead/step {ms(median(an['overhead']))} CPU/step {ms(res['cpu_sec'] / calls)} "
                          f"(load {load:.1f})", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shells", default=",".join(SHELLS))
    ap.add_argument("--out", type=Path, help="JSON result file (default bench/results/backends.json)")
    ap.add_argument("--worker", choices=SHELLS, help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(backend_worker(args.url, args.worker, args.calls)))
        return
    py = _mini_python()
    if py is None or importlib.util.find_spec("minisweagent") is None:
        raise SystemExit("mini-swe-agent is not installed: pip install -e '.[mini]' (and bench/setup_peers.sh, "
                         "or AHE_BENCH_PEER_PYTHON, for the direct side)")
    shells = [s.strip() for s in args.shells.split(",") if s.strip()]
    bad = [s for s in shells if s not in SHELLS]
    if bad:
        raise SystemExit(f"--shells: unknown {', '.join(bad)}; use {', '.join(SHELLS)}")
    data = run(args.calls, args.repeat, shells, py)
    rows = []
    for shell in shells:
        d, b = data[f"direct|{shell}"], data[f"backend|{shell}"]
        if not (d["step"] and b["step"]):
            continue
        rows.append([shell, ms(median(d["step"])), ms(median(b["step"])), f"{median(b['step']) / median(d['step']):.2f}x",
                     ms(median(d["overhead"])), ms(median(b["overhead"])),
                     f"{median(b['overhead']) / max(median(d['overhead']), 1e-9):.2f}x",
                     ms(median(d["cpu"])), ms(median(b["cpu"])), f"{median(b['cpu']) / max(median(d['cpu']), 1e-9):.2f}x",
                     f"{median(d['load'] + b['load']):.1f}"])
    print(table(["shell", "direct step", "backend step", "ratio", "direct overhead", "backend overhead", "ratio",
                 "direct CPU/step", "backend CPU/step", "ratio", "load"], rows, title=f"mini-swe-agent per step, {args.calls} calls, median of {args.repeat}"))
    path = write_result("backends", {"calls": args.calls, "repeat": args.repeat, "runs": data}, args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
