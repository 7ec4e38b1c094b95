"""mini-swe-agent for the tests: skip with the extra's name when it is absent, and a harness copied
from mini's own package (as a new user would copy it), never imported in the test process."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest
import yaml

SPEC = importlib.util.find_spec("minisweagent")
# AHE_REQUIRE_MINI=1 (CI's step 3): a missing mini-swe-agent fails these tests instead of skipping them
needs_mini = pytest.mark.skipif(SPEC is None and not os.environ.get("AHE_REQUIRE_MINI"),
                                reason="mini-swe-agent is not installed: pip install -e '.[mini]'")


def mini_config_file(name: str = "mini.yaml") -> Path:
    return Path(next(iter(SPEC.submodule_search_locations))) / "config" / name


def mini_harness(dest: Path, *, source: str = "mini.yaml", edit: dict | None = None, files: dict[str, str] | None = None,
                 config: str = "mini.yaml") -> Path:
    """A harness folder: harness.yaml + mini's `source` config copied as `config`, `edit` merged into
    its sections (a key set to None is removed), extra `files` written beside it."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "harness.yaml").write_text(f"backend: mini-swe-agent\nconfig: {config}\n")
    if edit is None:
        shutil.copyfile(mini_config_file(source), dest / config)
    else:
        data = yaml.safe_load(mini_config_file(source).read_text())
        for section, values in edit.items():
            for key, value in values.items():
                if value is None:
                    data.setdefault(section, {}).pop(key, None)
                else:
                    data.setdefault(section, {})[key] = value
        (dest / config).write_text(yaml.safe_dump(data, sort_keys=False))
    for name, text in (files or {}).items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_text(text)
    return dest
