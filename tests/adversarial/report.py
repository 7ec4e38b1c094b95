"""Run the adversarial suite and print (or write into docs/reliability.md) the table of attacks.

    python -m tests.adversarial.report                 # run tests/adversarial, print the table
    python -m tests.adversarial.report --write         # ... and replace the table in docs/reliability.md
    python -m tests.adversarial.report -k bad_input    # a subset (pytest -k)

Each test counts its attacks through tests/adversarial/record.py; this collects the counts.
Exit status: non-zero when any attack got through or any test failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "reliability.md"
BEGIN, END = "<!-- adversarial:begin -->", "<!-- adversarial:end -->"
ORDER = ["evolve agent", "code agent", "harness code", "harness code (transfer)", "harness code (Ray)", "harness code (docker sandbox)", "harness code (Ray + docker sandbox)",
         "mini-swe-agent harness code", "command-line agent", "command-line agent (docker)", "verifier forgery",
         "verifier forgery (docker)", "faults", "kills",
         "bad input", "secrets"]


def collect(folder: Path) -> list[dict]:
    rows = []
    for f in sorted(folder.glob("*.jsonl")):
        rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return sorted(rows, key=lambda r: (ORDER.index(r["category"]) if r["category"] in ORDER else 99, r["attack"]))


def table(rows: list[dict]) -> str:
    def cell(text: str) -> str:
        text = re.sub(r"/tmp/\S*?/test_[^/\s]*/", "…/", str(text))  # the test's own temporary folder
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| category | attack or fault | attempts | result | stopped or absorbed by | note |",
             "|---|---|---:|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['category']} | {cell(r['attack'])} | {r['attempts']} | **{r['outcome']}** | "
                     f"{cell(r['layer'])} | {cell(r['note'])[:300]} |")
    by_cat: dict[str, list[dict]] = {}
    for r in rows:
        by_cat.setdefault(r["category"], []).append(r)
    summary = []
    for cat in sorted(by_cat, key=lambda c: ORDER.index(c) if c in ORDER else 99):
        rs = by_cat[cat]
        bad = sum(r["outcome"] == "FAILED" for r in rs)
        summary.append(f"- **{cat}**: {len(rs) - bad} of {len(rs)} held ({sum(r['attempts'] for r in rs)} attempts)")
    return "\n".join(summary) + "\n\n" + "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help=f"replace the table between the markers in {DOC}")
    ap.add_argument("-k", default=None, help="only the tests matching this pytest -k expression")
    ap.add_argument("-n", default="2", help="pytest-xdist workers (default 2)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ahe-adversarial-") as folder:
        cmd = [sys.executable, "-m", "pytest", str(REPO / "tests" / "adversarial"), "-q", "-p", "no:cacheprovider",
               "-n", args.n] + (["-k", args.k] if args.k else [])
        proc = subprocess.run(cmd, cwd=REPO, env={**os.environ, "AHE_ADVERSARIAL_RESULTS": folder})
        rows = collect(Path(folder))
    text = table(rows)
    print(text)
    failed = any(r["outcome"] == "FAILED" for r in rows) or proc.returncode != 0
    if args.write:
        doc = DOC.read_text()
        head, _, rest = doc.partition(BEGIN)
        _, _, tail = rest.partition(END)
        DOC.write_text(f"{head}{BEGIN}\n{text}{END}{tail}")
        print(f"wrote the table into {DOC}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
