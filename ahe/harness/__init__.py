"""The harness as a versioned artifact: its git repository and the manifest of its edits.

Both the loop (ahe.evolution) and the evolve agent (evolve_agent) build on these, so they
live below both (docs/architecture.md).
"""

from ahe.harness.manifest import ChangeEntry, Evidence, Manifest
from ahe.harness.repo import HarnessRepo

__all__ = ["ChangeEntry", "Evidence", "HarnessRepo", "Manifest"]
