"""Two runs of a suite on the same seeds, compared seed by seed (docs/decisions.md): per world, H_best's share
of the achievable gain in A and in B, B − A with a 95 % interval from resampling seeds (paired: the same
worlds and draws on both sides, so the interval is far narrower than the two tables' own), and neutral kept.

    python bench/compare_suites.py A_OUT B_OUT [POLICY]

A and B are `ahe simulate --suite` output folders (their runs.jsonl), typically the same command before and
after a change to a policy. A difference whose interval holds 0 is not a difference.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

RESAMPLES = 4000


def load(out: Path, policy: str) -> dict[str, dict[int, dict]]:
    rows: dict[str, dict[int, dict]] = defaultdict(dict)
    for line in (out / "runs.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["policy"] == policy:
            rows[r["world"]][r["seed"]] = r
    return rows


def captured(gain: np.ndarray, room: np.ndarray) -> np.ndarray:
    """Pooled share over seeds (the suite table's "H_best captures"); resamples on the last axis."""
    return gain.sum(axis=-1) / room.sum(axis=-1)


def compare(a: dict[int, dict], b: dict[int, dict], rng: np.random.Generator) -> tuple[float, float, float, float, int]:
    """Captured in A and in B, the 2.5 and 97.5 percentiles of B − A over seed resamples, and the seeds compared."""
    seeds = sorted(set(a) & set(b))
    ga = np.array([a[s]["best_true"] - a[s]["seed_true"] for s in seeds])
    gb = np.array([b[s]["best_true"] - b[s]["seed_true"] for s in seeds])
    room = np.array([a[s]["oracle_true"] - a[s]["seed_true"] for s in seeds])
    idx = rng.integers(0, len(seeds), size=(RESAMPLES, len(seeds)))
    diff = captured(gb[idx], room[idx]) - captured(ga[idx], room[idx])
    lo, hi = np.percentile(diff, [2.5, 97.5])
    return float(captured(ga, room)), float(captured(gb, room)), float(lo), float(hi), len(seeds)


def neutral(rows: dict[int, dict]) -> float:
    return sum(r["neutral_kept"] for r in rows.values()) / max(1, sum(r["neutral_changes"] for r in rows.values()))


def main(a_out: Path, b_out: Path, policy: str) -> None:
    a, b = load(a_out, policy), load(b_out, policy)
    rng = np.random.default_rng(0)
    print("| world | seeds | A captures | B captures | B − A [95 %] | neutral kept A → B |")
    print("|---|---|---|---|---|---|")
    means = []
    for world in sorted(set(a) & set(b)):
        ca, cb, lo, hi, n = compare(a[world], b[world], rng)
        means.append((ca, cb))
        print(f"| {world} | {n} | {100 * ca:.1f} % | {100 * cb:.1f} % | {100 * (cb - ca):+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] "
              f"| {100 * neutral(a[world]):.0f} % → {100 * neutral(b[world]):.0f} % |")
    if means:
        ma, mb = (sum(x) / len(means) for x in zip(*means))
        print(f"| mean over worlds | | {100 * ma:.1f} % | {100 * mb:.1f} % | {100 * (mb - ma):+.1f} | |")


if __name__ == "__main__":
    if len(sys.argv) < 3 or not all((Path(p) / "runs.jsonl").exists() for p in sys.argv[1:3]):
        sys.exit("usage: python bench/compare_suites.py A_OUT B_OUT [POLICY]  (each an `ahe simulate --suite` folder with runs.jsonl)")
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "expected-value")
