"""Benchmark — system calls per step of a confined session against the in-process one: a count
that does not move with the machine's load (docs/benchmarks.md, section 10).

    python bench/bench_confine_syscalls.py          # needs strace

Runs bench_confine.py's overhead worker (no-op tool and shell tool, in-process and confined)
under `strace -f -c` at two session lengths; per step = (count at 100 calls - count at 50
calls) / 50, so the start-up of the interpreter, the jail and the sandbox cancels out. Counts
every process of the session: the benchmark's, the worker's jail, the sandbox's driver and the
commands it runs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import MockProcess, step_policy  # noqa: E402

BENCH = Path(__file__).resolve().parent / "bench_confine.py"
CONFIGS = [(mode, tool) for tool in ("noop", "shell") for mode in ("inproc", "confined")]


def _counts(path: Path) -> dict[str, int]:
    out = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and parts[0][0].isdigit():
            out[parts[-1]] = int(parts[3])
    return out


def main() -> None:
    if shutil.which("strace") is None:
        sys.exit("strace is not installed (apt-get install strace)")
    tmp = Path(tempfile.mkdtemp(prefix="ahe-bench-syscalls-"))
    runs: dict[tuple[str, str, int], tuple[dict[str, int], int]] = {}
    try:
        for calls in (50, 100):
            with MockProcess(step_policy(calls)) as mock:
                for mode, tool in CONFIGS:
                    mock.reset()
                    out = tmp / f"{mode}-{tool}-{calls}.txt"
                    p = subprocess.run(["strace", "-f", "-c", "-o", str(out), sys.executable, str(BENCH), "--worker",
                                        "overhead", "--mode", mode, "--tool", tool, "--url", mock.base_url],
                                       capture_output=True, text=True, timeout=1800)
                    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
                    if p.returncode != 0 or not lines or not json.loads(lines[-1])["ok"]:
                        sys.exit(f"{mode} {tool} failed: {(p.stderr or p.stdout)[-1500:]}")
                    runs[(mode, tool, calls)] = (_counts(out), json.loads(lines[-1])["turns"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("| configuration | system calls per step | the most frequent |\n|---|---:|---|")
    for mode, tool in CONFIGS:
        (a, ta), (b, tb) = runs[(mode, tool, 50)], runs[(mode, tool, 100)]
        per = {k: (b.get(k, 0) - a.get(k, 0)) / (tb - ta) for k in set(a) | set(b)}
        top = sorted(((v, k) for k, v in per.items() if k != "total"), reverse=True)[:5]
        print(f"| {mode} {tool} | {per['total']:.1f} | " + ", ".join(f"{k} {v:.1f}" for v, k in top) + " |")


if __name__ == "__main__":
    main()
