"""The live harness repository: every edit a commit, every iteration a tag (GitPython).

AHE sets its own committer identity on the repository, so it works on machines where git
has none configured, and it never touches the user's global git config.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import git

from ahe.errors import AheError

IDENTITY = ("AHE", "ahe@localhost")


@dataclass
class RevertOutcome:
    commit: str  # the commit that undid the change
    method: str  # "git revert" or "restore files"
    files: list[str]


class HarnessRepo:
    def __init__(self, path: Path) -> None:
        self.path = Path(path).resolve()
        try:
            self.repo = git.Repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise AheError(f"{self.path}: not a harness repository (no .git); create it with HarnessRepo.create") from None
        self._identity()

    @classmethod
    def create(cls, path: Path, seed: Path, *, tag: str = "iter-000",
               extra_files: dict[str, str] | None = None) -> "HarnessRepo":
        """Copy the seed workspace to `path` (plus `extra_files`, e.g. a harness.yaml naming the
        backend the config chose), commit it and tag it."""
        path = Path(path)
        if path.exists() and any(path.iterdir()):
            raise AheError(f"{path}: already exists and is not empty; choose a new folder or --resume")
        shutil.copytree(seed, path, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc"))
        for rel, text in (extra_files or {}).items():
            (path / rel).write_text(text, encoding="utf-8")
        repo = git.Repo.init(path, initial_branch="main")
        (path / ".gitignore").write_text("__pycache__/\n*.pyc\n")
        inst = cls(path)
        inst.commit_all("seed harness H0")
        inst.tag(tag)
        return inst

    def _identity(self) -> None:
        with self.repo.config_writer() as cw:
            cw.set_value("user", "name", IDENTITY[0])
            cw.set_value("user", "email", IDENTITY[1])
            cw.set_value("commit", "gpgsign", "false")

    # ---------------------------------------------------------------- state
    def head(self) -> str:
        return self.repo.head.commit.hexsha

    def is_dirty(self) -> bool:
        return self.repo.is_dirty(untracked_files=True)

    def changed_files(self) -> list[str]:
        """Uncommitted changes (tracked and untracked), as workspace-relative paths."""
        files = {d.a_path for d in self.repo.index.diff(None)} | {d.b_path for d in self.repo.index.diff(None)}
        files |= {d.a_path for d in self.repo.index.diff("HEAD")} if self.repo.head.is_valid() else set()
        files |= set(self.repo.untracked_files)
        return sorted(f for f in files if f)

    def files_in_commit(self, commit: str) -> list[str]:
        c = self.repo.commit(commit)
        if not c.parents:
            return sorted(c.stats.files)
        return sorted({d.a_path or d.b_path for d in c.parents[0].diff(c)} | {d.b_path for d in c.parents[0].diff(c) if d.b_path})

    def diff(self, a: str, b: str = "HEAD", paths: list[str] | None = None) -> str:
        return self.repo.git.diff(a, b, "--", *(paths or []))

    def show_file(self, rev: str, path: str) -> str | None:
        try:
            return self.repo.git.show(f"{rev}:{path}")
        except git.GitCommandError:
            return None

    # ---------------------------------------------------------------- writes
    def commit_paths(self, paths: list[str], message: str) -> str | None:
        """Commit exactly these paths (added, modified or deleted); None when nothing changed."""
        for p in paths:
            if (self.path / p).exists():
                self.repo.git.add("--", p)
            else:
                self.repo.git.rm("--cached", "--ignore-unmatch", "-r", "-q", "--", p)
        if not self.repo.index.diff("HEAD"):
            return None
        self.repo.git.commit("-m", message, "--no-verify")
        return self.head()

    def commit_all(self, message: str, *, allow_empty: bool = False) -> str | None:
        self.repo.git.add("-A")
        if not allow_empty and self.repo.head.is_valid() and not self.repo.index.diff("HEAD"):
            return None
        args = ["-m", message, "--no-verify"] + (["--allow-empty"] if allow_empty else [])
        self.repo.git.commit(*args)
        return self.head()

    def discard_uncommitted(self) -> None:
        """Throw away edits that were never recorded as a change."""
        self.repo.git.reset("--hard", "-q")
        self.repo.git.clean("-fdq")

    def tag(self, name: str, rev: str = "HEAD") -> None:
        self.repo.git.tag("-f", name, rev)

    def tag_commit(self, name: str) -> str | None:
        try:
            return self.repo.commit(name).hexsha
        except (git.BadName, ValueError):
            return None

    def revert(self, commit: str, message: str) -> RevertOutcome:
        """Undo exactly `commit`: `git revert`, or restore its files from its parent if that fails."""
        files = self.files_in_commit(commit)
        try:
            self.repo.git.revert("--no-edit", "--no-commit", commit)
            self.repo.git.commit("-m", message, "--no-verify", "--allow-empty")
            return RevertOutcome(self.head(), "git revert", files)
        except git.GitCommandError:
            try:
                self.repo.git.revert("--abort")
            except git.GitCommandError:
                self.repo.git.reset("--hard", "-q")
        parent = self.repo.commit(commit).parents[0].hexsha
        for f in files:
            if self.show_file(parent, f) is None:
                self.repo.git.rm("-q", "--ignore-unmatch", "--", f)
            else:
                self.repo.git.checkout(parent, "--", f)
        self.repo.git.commit("-m", message + " (files restored from the change's base)", "--no-verify", "--allow-empty")
        return RevertOutcome(self.head(), "restore files", files)
