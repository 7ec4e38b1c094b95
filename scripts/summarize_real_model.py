"""Summarize what a real model did in a real-model-check.sh output folder (markdown on stdout)."""

from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def trials(root: Path) -> list[str]:
    rows = []
    for res in sorted(root.rglob("result.json")):
        r = _load(res)
        if "task" in r:
            rows.append(f"| {res.parent.relative_to(root)} | {r.get('passed')} | {r.get('stop_reason')} | "
                        f"{r.get('error_class') or ''} | {r.get('turns')} | {r.get('tool_calls')} | "
                        f"{(r.get('error') or '')[:80]} |")
    return rows


def main(out: Path) -> None:
    print("### Trials\n\n| trial | passed | stop reason | error class | turns | tool calls | error |\n|---|---|---|---|---|---|---|")
    for root in (out / "run", out / "eval", out / "evolve"):
        if root.exists():
            print("\n".join(trials(root)))
    codes = collections.Counter(re.findall(r'"POST /v1/chat/completions HTTP/1.1" (\d{3})',
                                           (out / "server.log").read_text(errors="replace")
                                           if (out / "server.log").exists() else ""))
    print(f"\n### HTTP status of the model server's answers\n\n{dict(codes)}")
    print("\n### Evolve run\n")
    for it in sorted((out / "evolve" / "iterations").glob("*")):
        man = _load(it / "evolve" / "manifest.json")
        ov = _load(it / "analysis" / "overview.json")
        print(f"- iteration {it.name}: evolve stop {man.get('stop_reason')}, infra error {man.get('infra_error')!r}, "
              f"changes {len(man.get('changes', []))}; overview keys {sorted(ov)[:6]}")
    scores = _load(out / "evolve" / "scores.json")
    print(f"\nscores.json: {json.dumps(scores)[:600]}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
