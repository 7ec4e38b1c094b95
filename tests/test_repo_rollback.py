"""The harness repository and per-change rollback on a real git repository."""

from __future__ import annotations

from ahe.evolution.attribution import attribute
from ahe.harness.repo import HarnessRepo
from ahe.evolution.rollback import apply_rollbacks
from ahe.harness.manifest import ChangeEntry
from tests.conftest import SEED


def entry(cid, files, commit, fixes=()):
    return ChangeEntry(id=cid, component="long_term_memory", files=files, summary="a change", root_cause="cause x",
                       targeted_fix="fix x", predicted_fixes=list(fixes), commit=commit, status="accepted")


def test_create_commit_tag_and_revert_exactly_one_change(tmp_path):
    repo = HarnessRepo.create(tmp_path / "ws", SEED)
    seed = repo.head()
    assert repo.tag_commit("iter-000") == seed and not repo.is_dirty()
    mem = tmp_path / "ws" / "LongTermMEMORY.md"
    mem.write_text("- lesson L\n")
    c1 = repo.commit_paths(["LongTermMEMORY.md"], "chg-1")
    (tmp_path / "ws" / "middleware").mkdir()
    (tmp_path / "ws" / "middleware" / "guard.py").write_text("x = 1\n")
    c2 = repo.commit_paths(["middleware/guard.py"], "chg-2")
    assert repo.files_in_commit(c2) == ["middleware/guard.py"]
    att = attribute([entry("chg-1", ["LongTermMEMORY.md"], c1, ["x"]), entry("chg-2", ["middleware/guard.py"], c2, ["z"])],
                    {"x": 0.0, "y": 1.0, "z": 0.0}, {"x": 1.0, "y": 0.0, "z": 0.0}, iteration=2)
    report = apply_rollbacks(repo, att)
    assert [r.change_id for r in report.rolled_back] == ["chg-2"]
    rec = report.rolled_back[0]
    assert rec.method == "git revert" and rec.revert_commit == repo.head()
    assert not (tmp_path / "ws" / "middleware" / "guard.py").exists()
    assert mem.read_text() == "- lesson L\n"  # the kept change is untouched
    assert "rollback chg-2" in repo.repo.head.commit.message


def test_revert_falls_back_to_restoring_files_when_revert_conflicts(tmp_path):
    repo = HarnessRepo.create(tmp_path / "ws", SEED)
    mem = tmp_path / "ws" / "LongTermMEMORY.md"
    mem.write_text("- lesson A\n")
    c1 = repo.commit_paths(["LongTermMEMORY.md"], "chg-1")
    mem.write_text("- lesson A, reworded by a later change\n")  # a later edit of the same lines
    repo.commit_paths(["LongTermMEMORY.md"], "chg-2")
    out = repo.revert(c1, "rollback chg-1")
    assert out.method == "restore files" and out.files == ["LongTermMEMORY.md"]
    assert mem.read_text() == ""  # restored from chg-1's base (the seed's empty memory)
    assert not repo.is_dirty()


def test_tag_writes_what_git_tag_would_and_git_reads_it(tmp_path):
    """`HarnessRepo.tag` writes a plain tag itself (no git process); git must see exactly what `git tag -f` makes."""
    import git
    import pytest

    repo = HarnessRepo.create(tmp_path / "ws", SEED)
    seed = repo.head()
    assert seed == repo.repo.git.rev_parse("HEAD")  # head() reads the ref files
    (tmp_path / "ws" / "LongTermMEMORY.md").write_text("- lesson L\n")
    c1 = repo.commit_paths(["LongTermMEMORY.md"], "chg-1")
    repo.tag("iter-001")  # HEAD
    repo.tag("best", seed)  # a commit id
    repo.tag("best", c1)  # moved, as -f does
    assert repo.repo.git.rev_parse("iter-001") == c1 and repo.repo.git.rev_parse("best") == c1
    assert repo.repo.git.tag("-l").split() == ["best", "iter-000", "iter-001"]
    assert repo.tag_commit("best") == c1 and not list((tmp_path / "ws" / ".git" / "refs" / "tags").glob("*.lock"))
    repo.tag("v1/nested", seed)  # not a plain name: through git, which accepts it
    assert repo.repo.git.rev_parse("v1/nested") == seed
    with pytest.raises(git.GitCommandError):  # no such object: git's own error, nothing written
        repo.tag("ghost", "1" * 40)
    assert "ghost" not in repo.repo.git.tag("-l").split()
