"""Where a policy loses the achievable gain, per world of a suite run (docs/decisions.md, "Where the gain is lost").

    ahe simulate --suite standard --seed-range dev --policies expected-value --keep-runs all --out OUT
    python bench/decision_losses.py OUT [POLICY]

Each beneficial change the oracle keeps and H_best lacks is charged, at the gain it would add to H_best, to
the look that dropped it for good: its own round, a re-judgement in mid-run, or the last look (or to H_best's
choice when the final harness has it); a harmful change H_best keeps is charged its loss. Shares are of the
achievable gain (oracle − seed), pooled over seeds, as the suite table's "H_best captures". Neutral kept
counts the neutral changes in H_best. Reads what `--keep-runs all` leaves: each seed's truth.json, each
run's manifests, attribution.json files and the `best`/`final` tags of its workspace.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from ahe.simulate.world import MARKER_DIR, World

CATEGORIES = ["dropped-own-round", "dropped-mid-run", "dropped-last-look", "hbest-choice", "harmful-kept"]


def markers(workspace: Path, rev: str) -> set[str]:
    """The change uids present in a harness revision (its marker files)."""
    out = subprocess.run(["git", "-C", str(workspace), "ls-tree", "--name-only", f"{rev}:{MARKER_DIR}"],
                         capture_output=True, text=True)
    return {n[:-3] for n in out.stdout.split() if n.endswith(".md")} if out.returncode == 0 else set()


def verdicts(run: Path) -> tuple[dict[str, tuple[int, str]], dict[str, tuple[int, str]], int]:
    """Per change uid: its first and its last verdict (round, verdict); and the run's last round."""
    uid: dict[tuple[int, str], str] = {}
    rounds = sorted(p for p in (run / "iterations").iterdir() if p.name.isdigit())
    for it in rounds:
        manifest = it / "evolve" / "manifest.json"
        if manifest.exists():
            for c in json.loads(manifest.read_text())["changes"]:
                uid[(int(it.name), c["id"])] = Path(c["files"][0]).stem
    first: dict[str, tuple[int, str]] = {}
    last: dict[str, tuple[int, str]] = {}
    for it in rounds:
        att = it / "attribution.json"
        if not att.exists():
            continue
        data = json.loads(att.read_text())
        for v in data["changes"] + data.get("rejudged", []):
            made = v.get("change_iteration")
            u = uid.get((made if made is not None else int(it.name) - 1, v["change_id"]))
            if u is not None:
                first.setdefault(u, (int(it.name), v["verdict"]))
                last[u] = (int(it.name), v["verdict"])
    return first, last, int(rounds[-1].name)


def seed_losses(seed_dir: Path, policy: str) -> tuple[dict[str, float], float, list[int]] | None:
    run = seed_dir / policy
    if not (run / "scores.json").exists():
        return None
    world = World.model_validate_json((seed_dir / "truth.json").read_text())
    first, last, final_round = verdicts(run)
    best, final = markers(run / "workspace", "best"), markers(run / "workspace", "final")
    seed = world.pass_at_1(set())
    room = world.pass_at_1(world.oracle_markers(final_round - 1)) - seed
    got = world.pass_at_1(best)
    out: dict[str, float] = defaultdict(float)
    out["captured"] = got - seed
    neutral = [0, 0]
    for u, c in world.changes.items():
        if c.iteration > final_round - 1:
            continue
        if c.net > 1e-9 and u not in best:
            if u in final:
                cat = "hbest-choice"
            elif first.get(u, (0, ""))[1] == "rollback":
                cat = "dropped-own-round"
            elif last.get(u, (0, ""))[0] == final_round:
                cat = "dropped-last-look"
            else:
                cat = "dropped-mid-run"
            out[cat] += world.pass_at_1(best | {u}) - got
        if c.net < -1e-9 and u in best:
            out["harmful-kept"] += got - world.pass_at_1(best - {u})
        if not c.real:
            neutral[0] += 1
            neutral[1] += u in best
    return out, room, neutral


def main(root: Path, policy: str) -> None:
    print(f"| world | captured | {' | '.join(CATEGORIES)} | neutral kept |")
    print("|---|---|" + "---|" * len(CATEGORIES) + "---|")
    for world_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        total: dict[str, float] = defaultdict(float)
        room, neutral = 0.0, [0, 0]
        for seed_dir in sorted(world_dir.glob("seed-*")):
            got = seed_losses(seed_dir, policy)
            if got is None:
                continue
            losses, r, n = got
            room += r
            neutral = [neutral[0] + n[0], neutral[1] + n[1]]
            for k, v in losses.items():
                total[k] += v
        if room <= 0:
            continue
        cells = " | ".join(f"{100 * total[k] / room:.0f} %" for k in CATEGORIES)
        print(f"| {world_dir.name} | {100 * total['captured'] / room:.0f} % | {cells} | {neutral[1]}/{neutral[0]} |")


if __name__ == "__main__":
    if len(sys.argv) < 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: python bench/decision_losses.py OUT [POLICY]  (OUT: an `ahe simulate --suite ... --keep-runs all` folder)")
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "expected-value")
