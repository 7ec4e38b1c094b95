"""`python -m ahe.simulate.search.longer`: the tree worlds at 1×, 2× and 4× line's budget, to see where
line flattens (docs/search-simulator.md). The same rows as `ahe simulate --search tree` (`compare.one_seed`), with
a third budget; one process, seeds in order; writes OUT/rows.jsonl (resumable) and OUT/search.md."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ahe.simulate.search.compare import load_worlds, one_seed
from ahe.simulate.search.table import markdown, summarize


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m ahe.simulate.search.longer")
    ap.add_argument("--worlds", default="tree", help="tree, holdout, holdout2, holdout3 or holdout4")
    ap.add_argument("--seeds", default="1000-1019", help="first-last (evaluation seeds: 1000-1999)")
    ap.add_argument("--budgets", default="1,2,4")
    ap.add_argument("--out", type=Path, default=Path("runs/search-longer"))
    a = ap.parse_args(argv)
    lo, hi = (int(x) for x in a.seeds.split("-"))
    mults = tuple(int(x) for x in a.budgets.split(","))
    a.out.mkdir(parents=True, exist_ok=True)
    done = a.out / "rows.jsonl"
    rows = [json.loads(x) for x in done.read_text().splitlines()] if done.exists() else []
    have = {(r["world"], r["seed"]) for r in rows}
    for kind, sc in load_worlds(a.worlds):
        for seed in range(lo, hi + 1):
            if (sc.name, seed) in have:
                continue
            rows.append(one_seed(kind, sc.model_dump_json(), seed, str(a.out / "scratch"), mults=mults))
            with done.open("a") as fh:
                fh.write(json.dumps(rows[-1]) + "\n")
    text = markdown(summarize(rows))
    (a.out / "search.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
