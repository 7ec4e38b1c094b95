"""Shared pieces of the benchmarks: the MOCK model server in its own process, statistics,
the machine description, tables and the JSON written to bench/results/.

The scripted mock server always runs in a separate process (`bench/mockproc.py`), so its
CPU never competes with the harness being measured for the GIL, and every harness — AHE
and the peers — talks to the same server over real HTTP on the loopback.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"
PEER_PYTHON_DEFAULT = Path.home() / ".cache" / "ahe-bench" / "peers" / "bin" / "python"


# --------------------------------------------------------------------------- CPU time
def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its descendants (live ones, plus reaped children's totals)."""
    total = 0.0
    try:
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            total += tree_cpu(int(child))
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return total
    return total + sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    """CPU seconds of this process (all its threads) so far."""
    t = os.times()
    return t.user + t.system


# --------------------------------------------------------------------------- statistics
def pct(values: list[float], q: float) -> float:
    """q-th percentile (0..100), linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    k = (len(s) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def median(values: Iterable[float]) -> float:
    v = [x for x in values if x == x]
    return statistics.median(v) if v else float("nan")


def ms(x: float) -> str:
    return "n/a" if x != x else f"{x * 1000:.2f}"


# --------------------------------------------------------------------------- machine
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    bwrap = shutil.which("bwrap")
    bwrap_v = None
    if bwrap:
        try:
            bwrap_v = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=5).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": mem_gb,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "bwrap": bwrap_v,
        "loadavg_at_start": [round(x, 2) for x in load] if load else None,
        "packages": {d: _version(d) for d in ("ahe", "openai", "httpx2", "httpx", "pydantic", "typer", "GitPython")},
    }


# --------------------------------------------------------------------------- output
def table(headers: list[str], rows: list[list[Any]], title: str | None = None) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    if title:
        out.append(title)
    fmt = lambda r: "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) + " |"
    out.append(fmt(cells[0]))
    out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    out += [fmt(r) for r in cells[1:]]
    return "\n".join(out)


def write_result(name: str, data: dict[str, Any], out: Path | None = None) -> Path:
    path = out or (RESULTS / f"{name}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"benchmark": name, "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": " ".join([Path(sys.executable).name] + sys.argv),
            "machine": machine(), **data}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------- mock server
class MockProcess:
    """The scripted MOCK model server in a child process (see mockproc.py).

    `dump()` returns what it recorded since the last `reset()`: request bodies (when
    `log_requests`) and, per request, the monotonic arrival and reply times (CLOCK_MONOTONIC
    is system-wide on Linux, so these compare with the client's `time.monotonic()`).
    """

    def __init__(self, policy: dict[str, Any], *, log_requests: bool = True) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix=f"ahe-bench-mock-{os.getpid()}-"))  # pid-named: swept after a kill
        pol = self._dir / "policy.json"
        pol.write_text(json.dumps(policy))
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, str(BENCH / "mockproc.py"), str(pol), "1" if log_requests else "0"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=str(REPO),
        )
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http"):
            raise RuntimeError(f"mock server did not start: {line!r}")
        self.base_url = line
        self.pid = self.proc.pid

    def _cmd(self, cmd: str) -> str:
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def reset(self) -> None:
        self._cmd("reset")

    def dump(self) -> dict[str, Any]:
        path = self._dir / "dump.json"
        self._cmd(f"dump {path}")
        return json.loads(path.read_text())

    def cpu_seconds(self) -> float:
        return float(self._cmd("cpu"))

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._cmd("quit")
                self.proc.wait(timeout=10)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "MockProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def replay_floor(base_url: str, bodies: list[dict[str, Any]], repeats: int = 5) -> list[float]:
    """Per request: the median raw HTTP round trip of the same body (stdlib http.client, keep-alive).

    This is the floor any harness pays to get that answer from the mock server: the server's
    own work plus the loopback. What a harness adds on top of it is its overhead.
    """
    import http.client
    from urllib.parse import urlsplit

    u = urlsplit(base_url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    path = u.path.rstrip("/") + "/chat/completions"
    out = []
    for body in bodies:
        data = json.dumps(body).encode()
        took = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            conn.request("POST", path, body=data, headers={"Content-Type": "application/json", "Authorization": "Bearer x"})
            resp = conn.getresponse()
            resp.read()
            took.append(time.perf_counter() - t0)
        out.append(statistics.median(took))
    conn.close()
    return out


def peer_python() -> Path | None:
    p = Path(os.environ.get("AHE_BENCH_PEER_PYTHON") or PEER_PYTHON_DEFAULT)
    return p if p.exists() else None


def parse_peers(value: str, valid: Iterable[str], parser: Any) -> list[str]:
    """The `--peers` comma list; an unknown name ends the script with one sentence listing the valid ones."""
    valid = list(valid)
    if value.strip() == "none":
        return []
    names = [p.strip() for p in value.split(",") if p.strip()]
    bad = [n for n in names if n not in valid]
    if bad:
        print(f"{parser.prog}: --peers: unknown peer {', '.join(repr(b) for b in bad)}; "
              f"valid names are {', '.join(valid)} (comma list), or 'none'.", file=sys.stderr)
        raise SystemExit(2)
    return names


def peer_versions(py: Path) -> dict[str, str | None]:
    code = ("import json\nfrom importlib.metadata import version, PackageNotFoundError\n"
            "out={}\nfor d in ('mini-swe-agent','litellm','openai-agents','smolagents','openai','httpx'):\n"
            "    try: out[d]=version(d)\n    except PackageNotFoundError: out[d]=None\nprint(json.dumps(out))")
    try:
        return json.loads(subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=60).stdout)
    except Exception:
        return {}


# --------------------------------------------------------------------------- the work
INSTRUCTION = "Benchmark session: call your tool once per turn until told otherwise. BENCH"
WARMUP_INSTRUCTION = "WARMUP session: call your tool a few times, then stop."
WARMUP_TURNS = 4
STEP_COMMAND = "echo step {{ turn }}"
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def step_policy(calls: int, latency_sec: float = 0.0) -> dict[str, Any]:
    """Every harness gets the same work: `calls` model calls, each but the last calling one tool.

    The tool differs only by name: `noop` (AHE's in-process no-op, openai-agents,
    smolagents), `run_shell_command` (AHE's seed harness), `bash` (mini-swe-agent). The last
    call ends the session the way each harness ends: a reply without a tool call (AHE,
    openai-agents), the `final_answer` tool (smolagents), or mini-swe-agent's submit command.
    A session whose instruction contains WARMUP ends after WARMUP_TURNS calls.
    """
    def ends(turn_min: int, extra: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"name": f"end-bash-{turn_min}", "match": {"turn_min": turn_min, "tools_include": "bash", **extra},
             "tool_calls": [{"name": "bash", "arguments": {"command": SUBMIT}}]},
            {"name": f"end-final-answer-{turn_min}", "match": {"turn_min": turn_min, "tools_include": "final_answer", **extra},
             "tool_calls": [{"name": "final_answer", "arguments": {"answer": "done"}}]},
            {"name": f"end-{turn_min}", "match": {"turn_min": turn_min, **extra}, "reply": "Done."},
        ]

    rules = [dict(r, latency_sec=0) for r in ends(WARMUP_TURNS, {"first_user_contains": "WARMUP"})] + ends(calls, {})
    for tool in ("noop", "run_shell_command", "bash"):  # warm-up sessions are answered at once
        rules.append({"name": f"warmup-step-{tool}", "match": {"tools_include": tool, "first_user_contains": "WARMUP"},
                      "latency_sec": 0, "tool_calls": [{"name": tool, "arguments": {"command": STEP_COMMAND}}]})
    for tool in ("noop", "run_shell_command", "bash"):
        rules.append({"name": f"step-{tool}", "match": {"tools_include": tool},
                      "tool_calls": [{"name": tool, "arguments": {"command": STEP_COMMAND}}]})
    return {"name": "bench-steps", "latency_sec": latency_sec, "rules": rules, "default": {"reply": "mock: no rule matched"}}


def session_steps(dump: dict[str, Any]) -> list[dict[str, Any]]:
    """Per measured request, in order: arrival, reply sent (monotonic), and its first user message."""
    out = []
    for body, (t0, t1) in zip(dump["requests"], dump["times"]):
        first_user = next((m.get("content") for m in body.get("messages", []) if m.get("role") == "user"), "") or ""
        if isinstance(first_user, list):
            first_user = " ".join(p.get("text", "") for p in first_user if isinstance(p, dict))
        out.append({"arrival": t0, "sent": t1, "warmup": "WARMUP" in first_user, "bytes": len(json.dumps(body))})
    return out
