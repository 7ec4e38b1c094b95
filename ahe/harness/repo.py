"""The live harness repository: every edit a commit, every iteration a tag (GitPython).

AHE sets its own committer identity on the repository, so it works on machines where git
has none configured, and it never touches the user's global git config.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import git

from ahe.errors import AheError

IDENTITY = ("AHE", "ahe@localhost")
# tag names AHE writes as a loose ref itself (iter-003, base-002, best, final, ...): a subset of what
# `git check-ref-format` accepts; any other name goes through `git tag`
_PLAIN_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*")
_SHA = re.compile(r"[0-9a-f]{40}")


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
        git.Repo.init(path, initial_branch="main")
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
        """HEAD's commit, read from the ref files (no git process, no object lookup)."""
        return git.SymbolicReference.dereference_recursive(self.repo, "HEAD")

    def is_dirty(self) -> bool:
        return self.repo.is_dirty(untracked_files=True)

    def changed_files(self) -> list[str]:
        """Uncommitted changes (tracked and untracked), as workspace-relative paths."""
        unstaged = self.repo.index.diff(None)
        files = {d.a_path for d in unstaged} | {d.b_path for d in unstaged}
        files |= {d.a_path for d in self.repo.index.diff("HEAD")} if self.repo.head.is_valid() else set()
        files |= set(self.repo.untracked_files)
        return sorted(f for f in files if f)

    def files_in_commit(self, commit: str) -> list[str]:
        c = self.repo.commit(commit)
        if not c.parents:
            return sorted(c.stats.files)
        # both paths of a rename or copy (-M, as GitPython's diff), one of any other change
        fields = self.repo.git.diff_tree("-r", "-M", "--name-status", "-z", "--no-commit-id", c.parents[0].hexsha, c.hexsha)
        parts, files = fields.split("\0"), set()
        i = 0
        while i < len(parts) and parts[i]:
            n = 2 if parts[i][0] in "RC" else 1
            files.update(parts[i + 1:i + 1 + n])
            i += 1 + n
        return sorted(f for f in files if f)

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
        if not self.repo.git.diff("--cached", "--name-only", "-z"):  # nothing staged against HEAD
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

    def clone_at(self, dest: Path, base: str) -> "HarnessRepo":
        """A fresh clone of this repository at `base` (branch `main`) in `dest`, for a child
        harness (a variant, a tree child, a merge, a finalist) evolved or evaluated apart."""
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        repo = git.Repo.clone_from(str(self.path), str(dest), no_checkout=True)
        repo.git.checkout("-q", "-B", "main", base)
        repo.close()
        return HarnessRepo(dest)

    def discard_uncommitted(self) -> None:
        """Throw away edits that were never recorded as a change."""
        self.repo.git.reset("--hard", "-q")
        self.repo.git.clean("-fdq")

    def tag(self, name: str, rev: str = "HEAD") -> None:
        """`git tag -f name rev`. A plain name on HEAD or a full commit id is written as the loose ref
        `git tag` writes (under git's lock file, after checking the object exists), without a git
        process: a run tags several times a round."""
        sha = self.head() if rev == "HEAD" else rev
        if _PLAIN_TAG.fullmatch(name) and not name.endswith(".lock") and _SHA.fullmatch(sha) and self._has_commit(sha):
            ref = self.path / ".git" / "refs" / "tags" / name
            ref.parent.mkdir(parents=True, exist_ok=True)
            lock = ref.with_name(name + ".lock")
            try:
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:  # another writer holds git's lock: let git report it
                self.repo.git.tag("-f", name, rev)
                return
            try:
                os.write(fd, (sha + "\n").encode())
            finally:
                os.close(fd)
            os.replace(lock, ref)
            return
        self.repo.git.tag("-f", name, rev)

    def _has_commit(self, sha: str) -> bool:
        try:
            return self.repo.odb.info(bytes.fromhex(sha)).type == b"commit"
        except (ValueError, git.BadObject, git.BadName):
            return False

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
