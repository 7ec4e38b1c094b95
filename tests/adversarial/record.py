"""Every attack of the adversarial suite is counted: one JSON line per attack and outcome.

A test calls `record(...)` for each attack it makes, then asserts the outcome; the line is
written whether the assertion holds or not (outcome "FAILED" when the attack got through), so
`python -m tests.adversarial.report` can show attempts and results for the whole catalogue.
Lines go to $AHE_ADVERSARIAL_RESULTS/<pid>.jsonl when that folder is set (the report sets it),
nowhere otherwise.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

Outcome = str  # "refused" | "survived" | "FAILED"


def record(category: str, attack: str, *, ok: bool, layer: str, attempts: int = 1, good: str = "refused",
           note: str = "") -> bool:
    """Count one attack (or one fault kind); returns `ok` so tests can `assert record(...)`."""
    folder = os.environ.get("AHE_ADVERSARIAL_RESULTS")
    if folder:
        row = {"category": category, "attack": attack, "attempts": attempts,
               "outcome": good if ok else "FAILED", "layer": layer, "note": note}
        with open(Path(folder) / f"{os.getpid()}.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
    return ok


class Tally:
    """Collects the attacks of one test and asserts them all at the end, so one failure
    does not hide the count of the others."""

    def __init__(self, category: str) -> None:
        self.category = category
        self.failed: list[str] = []

    def __call__(self, attack: str, ok: bool, layer: str, *, attempts: int = 1, good: str = "refused",
                 note: str = "") -> None:
        record(self.category, attack, ok=ok, layer=layer, attempts=attempts, good=good, note=note)
        if not ok:
            self.failed.append(f"{attack} ({note})" if note else attack)

    def check(self) -> None:
        assert not self.failed, f"{self.category}: got through: {self.failed}"
