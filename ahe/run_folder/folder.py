"""The one owner of a run folder's layout (DESIGN.md §7): every path, every typed read.

Readers (audit, report, diff, transfer, the evolve agent's context) and the writer (the
loop) go through `RunFolder` and `IterationFolder`, so a path or a schema changes in one
place. Reads are lenient — a missing or unreadable file is None, never an exception — since
a run may be still going, killed, or from an older AHE; writes are atomic.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ahe.harness.manifest import Manifest
from ahe.io import atomic_write_json, atomic_write_text
from ahe.rollout.models import RunResults, TrialResult
from ahe.run_folder.decisions import Attribution, RollbackReport
from ahe.run_folder.records import LoopState, Scores

M = TypeVar("M", bound=BaseModel)
log = logging.getLogger(__name__)
_WARNED: set[tuple[str, str]] = set()


def read_model(path: Path, model: type[M]) -> M | None:
    """`model` parsed from `path`, or None when the file is missing or does not parse. A file that
    is valid JSON but not a `model` is still None, with one warning per path and schema: silence
    there once hid a whole search tree (a change id the schema refused) for a session."""
    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError:
        return None
    except ValidationError as e:
        _warn_invalid(path, model, e)
        return None
    except ValueError:
        return None


def _warn_invalid(path: Path, model: type[BaseModel], error: ValidationError) -> None:
    errors = error.errors()
    if not errors or errors[0].get("type") == "json_invalid":
        return  # not JSON (yet): a file another process is writing, or a truncated one — lenient as ever
    key = (str(path), model.__name__)
    if key in _WARNED:
        return
    _WARNED.add(key)
    first = errors[0]
    where = ".".join(str(x) for x in first.get("loc", ())) or "(top level)"
    log.warning("%s: not a valid %s (%s: %s; %d error(s)); it is read as missing — fix or remove the file",
                path, model.__name__, where, first.get("msg", ""), len(errors))


_UNCHANGED: dict[tuple[str, type], tuple[tuple[int, ...], Any]] = {}
RACY_NS = 1_000_000_000  # a file modified this recently may change again without a new timestamp


def read_unchanged(path: Path, model: type[M]) -> M | None:
    """`read_model` for a caller that never modifies what it gets: the model parsed before while the
    file is unchanged (its stat result: device, inode, size, modification and change time), e.g. an
    earlier round's results.json, which the noise policies replay every round. A file modified
    less than a second ago is parsed every time (it may change within one tick of the clock)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key, stamp = (str(path), model), (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    hit = _UNCHANGED.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    value = read_model(path, model)
    if value is not None and st.st_mtime_ns < time.time_ns() - RACY_NS:
        if len(_UNCHANGED) > 1024:  # a run's rounds, several times over; a suite worker runs hundreds of runs
            _UNCHANGED.clear()
        _UNCHANGED[key] = (stamp, value)
    return value


def read_json(path: Path) -> Any:
    """Raw JSON of `path`, or None when missing or unreadable (for files without a schema)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_model(path: Path, value: BaseModel) -> None:
    atomic_write_json(path, json.loads(value.model_dump_json()))


class HarnessRef(BaseModel):
    """harness.json: which harness an iteration evaluated."""

    iteration: int | None = None
    evaluates: str | None = None  # the tag, e.g. iter-002
    commit: str | None = None
    workspace: str | None = None
    code_hash: str | None = None


class IterationFolder:
    """`iterations/NNN/`: iteration t evaluates H_{t-1} and produces H_t."""

    def __init__(self, root: Path, number: int) -> None:
        self.root = root
        self.number = number

    # paths ------------------------------------------------------------------------------
    @property
    def harness_json(self) -> Path:
        return self.root / "harness.json"

    @property
    def rollouts(self) -> Path:
        return self.root / "rollouts"

    @property
    def results_json(self) -> Path:
        return self.root / "results.json"

    @property
    def attribution_json(self) -> Path:
        return self.root / "attribution.json"

    @property
    def rollback_json(self) -> Path:
        return self.root / "rollback.json"

    @property
    def corpus(self) -> Path:
        return self.root / "corpus"

    @property
    def analysis(self) -> Path:
        return self.root / "analysis"

    @property
    def evolve(self) -> Path:
        return self.root / "evolve"

    @property
    def manifest_json(self) -> Path:
        return self.evolve / "manifest.json"

    @property
    def manifest_partial_json(self) -> Path:
        return self.evolve / "manifest.partial.json"

    @property
    def reeval(self) -> Path:
        """reeval/<task>/<harness-tag>/trial-<n>/: targeted re-evaluation trials (noise policy)."""
        return self.root / "reeval"

    @property
    def reeval_json(self) -> Path:
        return self.root / "reeval.json"

    @property
    def reeval_harness(self) -> Path:
        """reeval-harness/<harness-tag>/: the files of each re-evaluated harness (a git archive)."""
        return self.root / "reeval-harness"

    @property
    def explore(self) -> Path:
        """The explore agent's phase (iteration 1 only): sources/, manifest.json, trajectory."""
        return self.root / "explore"

    def explore_manifest(self) -> Manifest | None:
        return read_model(self.explore / "manifest.json", Manifest)

    @property
    def variants(self) -> Path:
        """Best-of-N (docs/variants.md): variants.json and one folder per variant."""
        return self.root / "variants"

    @property
    def variants_json(self) -> Path:
        return self.variants / "variants.json"

    def variants_report(self) -> "VariantsReport | None":
        from ahe.run_folder.decisions import VariantsReport

        return read_model(self.variants_json, VariantsReport)

    def variant(self, n: int) -> Path:
        """Variant n: workspace/ (its own clone), evolve/ (manifest, trajectory), rollouts/, results.json."""
        return self.variants / f"v{n}"

    @property
    def tree(self) -> Path:
        """`search: tree` (docs/search.md): one folder per evolve call (c1, c2, …) and merge/."""
        return self.root / "tree"

    def tree_child(self, i: int) -> Path:
        """Tree child i: workspace/ (its own clone), evolve/ (the call's manifest), rollouts/, results.json."""
        return self.tree / f"c{i}"

    def tree_evolve_calls(self) -> int:
        """The tree's evolve calls finished in this iteration (each child folder's evolve/manifest.json)."""
        return sum(1 for _ in self.tree.glob("c*/evolve/manifest.json"))

    def trial_dir(self, task: str, trial: int) -> Path:
        return self.rollouts / task / f"trial-{trial}"

    def relative(self, path: Path, run_root: Path) -> str:
        return str(path.relative_to(run_root))

    # typed reads ------------------------------------------------------------------------
    def harness(self) -> HarnessRef | None:
        return read_model(self.harness_json, HarnessRef)

    def results(self) -> RunResults | None:
        return read_model(self.results_json, RunResults)

    def attribution(self) -> Attribution | None:
        return read_model(self.attribution_json, Attribution)

    def rollback(self) -> RollbackReport | None:
        return read_model(self.rollback_json, RollbackReport)

    def manifest(self) -> tuple[Manifest | None, bool]:
        """(manifest, partial): the final manifest, else the one a killed evolve phase left."""
        final = read_model(self.manifest_json, Manifest)
        if final is not None:
            return final, False
        return read_model(self.manifest_partial_json, Manifest), self.manifest_partial_json.exists()

    def trial_results(self) -> list[TrialResult]:
        out = []
        for path in sorted(self.rollouts.glob("*/trial-*/result.json")):
            r = read_model(path, TrialResult)
            if r is not None:
                out.append(r)
        return out


class RunFolder:
    """One experiment's run folder: paths, typed reads, atomic writes."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()

    # paths ------------------------------------------------------------------------------
    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def experiment_yaml(self) -> Path:
        return self.root / "experiment.yaml"

    @property
    def loop_state_json(self) -> Path:
        return self.root / "loop_state.json"

    @property
    def scores_json(self) -> Path:
        return self.root / "scores.json"

    @property
    def history_md(self) -> Path:
        return self.root / "history.md"

    @property
    def events_jsonl(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def sealed(self) -> Path:
        """The run's sealed verifiers (ahe.tasks.snapshot), taken at its start."""
        from ahe.tasks.snapshot import SEAL_DIR

        return self.root / SEAL_DIR

    @property
    def tasks_source(self) -> Path:
        """Where a task source writes the run's task folders (ahe.tasks.sources)."""
        return self.root / "tasks-source"

    @property
    def iterations_dir(self) -> Path:
        return self.root / "iterations"

    def iteration(self, it: int) -> IterationFolder:
        return IterationFolder(self.iterations_dir / f"{it:03d}", it)

    def iterations(self) -> list[int]:
        """Numbers of the iteration folders present, ascending."""
        if not self.iterations_dir.is_dir():
            return []
        return sorted(int(p.name) for p in self.iterations_dir.iterdir() if p.is_dir() and p.name.isdigit())

    def tree_evolve_calls(self) -> int:
        """The tree's evolve calls finished in the whole run, every iteration's."""
        return sum(self.iteration(it).tree_evolve_calls() for it in self.iterations())

    def looks_like_run(self) -> bool:
        return self.iterations_dir.is_dir() or self.scores_json.exists() or self.loop_state_json.exists()

    # typed reads and writes -------------------------------------------------------------
    def load_state(self) -> LoopState:
        return read_model(self.loop_state_json, LoopState) or LoopState()

    def has_state(self) -> bool:
        return self.loop_state_json.exists()

    def save_state(self, state: LoopState) -> None:
        write_model(self.loop_state_json, state)

    def load_scores(self) -> Scores:
        return read_model(self.scores_json, Scores) or Scores()

    def save_scores(self, scores: Scores) -> None:
        data = json.loads(scores.model_dump_json())
        data["totals"] = scores.totals()
        atomic_write_json(self.scores_json, data)

    def history(self, line: str) -> None:
        """Append to history.md (human-readable; the evolve agent reads it too)."""
        if not self.history_md.exists():
            atomic_write_text(self.history_md, "# History of the evolution\n\n")
        with open(self.history_md, "a", encoding="utf-8") as f:
            f.write(line.rstrip() + "\n")

    def event(self, type_: str, **data: Any) -> None:
        with open(self.events_jsonl, "a", encoding="utf-8") as f:
            f.write(json.dumps({"ts": round(time.time(), 3), "type": type_, **data}, default=str) + "\n")

    def events(self) -> list[dict[str, Any]]:
        out = []
        try:
            lines = self.events_jsonl.read_text(encoding="utf-8").splitlines()
        except OSError:
            return out
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line cut by a kill
        return out
