"""Every bundled task passes the audit: oracle passes, do-nothing fails, tests unreadable."""

from __future__ import annotations

import shutil

import pytest

from ahe.tasks import load_tasks
from ahe.tasks.check import check_tasks
from ahe.tasks.sandboxes import factories_for
from tests.conftest import REPO


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
async def test_bundled_suite_passes_tasks_check(tmp_path):
    loaded = load_tasks(REPO / "examples" / "tasks")
    assert not loaded.errors
    assert len(loaded.tasks) >= 20
    assert {t.difficulty for t in loaded.tasks} == {"easy", "medium", "hard"}
    report = await check_tasks(loaded.tasks, factories_for("local", isolation="bwrap"), concurrency=3, work_dir=tmp_path)
    failed = {t.name: {k: v.detail for k, v in t.items.items()} for t in report.tasks if not t.ok}
    assert not failed
