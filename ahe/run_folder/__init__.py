"""The run folder of an experiment (DESIGN.md §7): its layout and the schema of every file.

`RunFolder(root)` and its `IterationFolder`s own every path; `records` (loop state, scores)
and `decisions` (attribution, rollback) hold the schemas the loop writes and every reader
parses. Nothing outside this package spells `iterations/NNN/...`.
"""

from ahe.run_folder.decisions import (
    Attribution,
    ChangeVerdict,
    PredictionScore,
    ReevalHarness,
    ReevalSummary,
    BestCandidate,
    BestDecision,
    LATEST_REASON,
    RollbackRecord,
    RollbackReport,
    TaskEvidenceRecord,
    VariantRecord,
    VariantsReport,
    Verdict,
    WatchEvidence,
)
from ahe.run_folder.folder import HarnessRef, IterationFolder, RunFolder, read_json, read_model, read_unchanged, write_model
from ahe.run_folder.records import PHASES, IterationScore, LoopState, Scores

__all__ = [
    "PHASES", "Attribution", "ChangeVerdict", "HarnessRef", "IterationFolder", "IterationScore", "LoopState",
    "PredictionScore", "ReevalHarness", "ReevalSummary", "BestCandidate", "BestDecision", "LATEST_REASON", "RollbackRecord", "TaskEvidenceRecord", "RollbackReport", "RunFolder", "Scores", "VariantRecord", "VariantsReport", "Verdict", "WatchEvidence", "read_json",
    "read_model", "read_unchanged", "write_model",
]
