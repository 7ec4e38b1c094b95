"""Plugins: modules outside AHE that register sandbox backends, agent backends, policies or task sources.

They are named by the `AHE_PLUGINS` environment variable (comma-separated module names) or by
the `ahe.plugins` entry-point group of an installed package, and imported once, on the first
use of any registry. A plugin that fails to import stops the command with one sentence: a
registry that silently lacks the user's backend would run something else.
"""

from __future__ import annotations

import importlib
import os

from ahe.errors import AheError

_loaded = False


def load_plugins() -> None:
    """Import every plugin module once (idempotent; safe to call from inside a plugin's import)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name in filter(None, (m.strip() for m in os.environ.get("AHE_PLUGINS", "").split(","))):
        try:
            importlib.import_module(name)
        except Exception as exc:  # a plugin must never take the whole tool down silently
            raise AheError(f"AHE_PLUGINS names {name!r}, which failed to import: {exc}") from None
    from importlib.metadata import entry_points

    for ep in entry_points(group="ahe.plugins"):
        try:
            ep.load()
        except Exception as exc:
            raise AheError(f"the ahe.plugins entry point {ep.name!r} ({ep.value}) failed to load: {exc}") from None
