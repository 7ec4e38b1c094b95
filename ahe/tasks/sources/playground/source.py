"""The `playground` task source: `--tasks playground:DIR[?split=train|holdout&holdout=0.3]`.

DIR is a playground project, or a folder of them (the bundled seeds: examples/playground, or
the `projects/*/project` folders `ahe tasks generate` writes). The tasks are derived once
into the run's source folder and reused on resume; `split` picks one side of the held-out
split by project (default share 0.3), without it every task is used.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs

from ahe.errors import AheError

_KEYS = {"split", "holdout"}


class PlaygroundSource:
    name = "playground"

    def __init__(self, argument: str) -> None:
        path, _, query = argument.partition("?")
        params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        unknown = sorted(set(params) - _KEYS)
        if unknown or not path:
            raise AheError(f"--tasks playground:{argument}: write playground:DIR[?split=train|holdout&holdout=0.3]"
                           + (f"; unknown option {unknown[0]!r}" if unknown else "; DIR is missing"))
        self.path = Path(path).expanduser()
        self.split = params.get("split")
        if self.split not in (None, "train", "holdout"):
            raise AheError(f"--tasks playground:{argument}: split must be train or holdout, not {self.split!r}.")
        try:
            self.holdout = float(params.get("holdout", 0.3 if self.split else 0.0))
        except ValueError:
            raise AheError(f"--tasks playground:{argument}: holdout must be a number such as 0.3.") from None

    def describe(self) -> str:
        side = f", the {self.split} split (holdout {self.holdout:g})" if self.split else ""
        return f"SWE-Playground tasks derived from {self.path}{side}"

    def produce(self, out: Path) -> Path:
        from ahe.tasks.sources.playground.taskset import LOG_FILE, derive_task_set

        key = {"path": str(self.path.resolve()), "holdout": self.holdout}
        stamp = out / "source.json"
        if not ((out / LOG_FILE).is_file() and stamp.is_file() and json.loads(stamp.read_text()) == key):
            derive_task_set([self.path], out, holdout=self.holdout)
            stamp.write_text(json.dumps(key))
        if self.split:
            return out / self.split
        return out
