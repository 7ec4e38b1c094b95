"""Targeted re-evaluation: extra trials of a few tasks on a tagged harness, resumable.

Layout (DESIGN.md §7, §11.1)::

    iterations/NNN/reeval/<task>/<harness-tag>/trial-<n>/result.json   one re-evaluation trial
    iterations/NNN/reeval.json                                         tags, spending, decisions
    iterations/NNN/reeval-harness/<harness-tag>/                       that tag's files (a git archive)

A trial with a result.json is never run again: asking for "n trials of task τ on tag T" runs
only the missing ones, so a killed attribution phase resumes where it stopped. The harnesses
are tags of the workspace repository: the base and head of a round, and "head without change
c" (a commit built with git plumbing, never checked out in the live workspace).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ahe.evolution.evidence import Counts
from ahe.harness.repo import HarnessRepo
from ahe.llm.types import Usage
from ahe.rollout.executor import Executor
from ahe.rollout.models import TrialSpec
from ahe.rollout.scheduler import RolloutConfig
from ahe.rollout.trial import load_result
from ahe.run_folder import IterationFolder
from ahe.tempdirs import temp_dir


def tag_commit(repo: HarnessRepo, tag: str) -> str | None:
    """The commit a tag names: its loose ref file read directly (every tag AHE makes is one), else git."""
    ref = Path(repo.path) / ".git" / "refs" / "tags" / tag
    try:
        sha = ref.read_text().strip()
    except OSError:
        return repo.tag_commit(tag)
    return sha if len(sha) == 40 else repo.tag_commit(tag)


def without_change(repo: HarnessRepo, head: str, change_commit: str, tag: str) -> str:
    """Tag (and return) a commit whose tree is `head` with `change_commit` undone."""
    with temp_dir("reeval-index") as scratch:  # a private git index; swept if we are killed
        env = {**os.environ, "GIT_INDEX_FILE": str(scratch / "index"), "HEAD_C": head, "CHANGE_C": change_commit,
               "TAG": tag, "MSG": f"re-evaluation harness: {head[:10]} without {change_commit[:10]}"}
        # one shell for the common case (the change still applies in reverse): read-tree, reverse patch, tree, commit, tag
        script = ('git read-tree "$HEAD_C" && git diff --binary --full-index "$CHANGE_C" "$CHANGE_C^" | git apply --cached - '
                  '&& t=$(git write-tree) && c=$(git commit-tree "$t" -p "$HEAD_C" -m "$MSG") && git tag -f "$TAG" "$c" >/dev/null '
                  '&& echo "$c"')
        p = subprocess.run(["sh", "-c", script], cwd=str(repo.path), env=env, capture_output=True, text=True)
        if p.returncode == 0 and len(p.stdout.strip()) == 40:
            return p.stdout.strip()
        return _without_change_by_files(repo, head, change_commit, tag, env)


def _without_change_by_files(repo: HarnessRepo, head: str, change_commit: str, tag: str, env: dict[str, str]) -> str:
    """The change no longer applies in reverse: restore its files from its parent."""
    git = repo.repo.git
    subprocess.run(["git", "-C", str(repo.path), "read-tree", head], env=env, check=True, capture_output=True)
    for f in repo.files_in_commit(change_commit):
        ls = git.ls_tree(f"{change_commit}^", "--", f)
        if ls:
            mode, _, rest = ls.partition(" ")
            sha = rest.split()[1]
            subprocess.run(["git", "-C", str(repo.path), "update-index", "--add", "--cacheinfo", f"{mode},{sha},{f}"],
                           env=env, check=True, capture_output=True)
        else:
            subprocess.run(["git", "-C", str(repo.path), "update-index", "--force-remove", "--", f],
                           env=env, check=True, capture_output=True)
    tree = subprocess.run(["git", "-C", str(repo.path), "write-tree"], env=env, check=True, capture_output=True,
                          text=True).stdout.strip()
    commit = git.commit_tree(tree, "-p", head, "-m", f"re-evaluation harness: {head[:10]} without {change_commit[:10]}")
    repo.tag(tag, commit)
    return commit


@dataclass
class Reevaluator:
    """Runs re-evaluation trials of one iteration through the loop's executor."""

    repo: HarnessRepo
    folder: IterationFolder
    rollout: RolloutConfig
    executor: Executor
    task_dirs: dict[str, Path]
    budget: int  # trials this iteration may spend
    spent: int = 0  # trials requested so far (run now or found finished)
    ran: int = 0  # trials actually run in this session (the rest were found finished)
    usage: Usage = field(default_factory=Usage)
    tags: dict[str, str] = field(default_factory=dict)  # tag -> commit
    _counts: dict[tuple[str, str], list[bool]] = field(default_factory=dict)
    _ready: set[Path] = field(default_factory=set)  # harness folders extracted (or found) in this session

    @property
    def left(self) -> int:
        return max(0, self.budget - self.spent)

    def harness(self, tag: str) -> Path:
        """The files of `tag`, extracted once into reeval-harness/<tag>/."""
        commit = self.tags.get(tag) or tag_commit(self.repo, tag)  # a tag is never moved within an iteration
        if commit is None:
            raise ValueError(f"re-evaluation: no tag {tag} in the workspace")
        self.tags[tag] = commit
        dest = self.folder.reeval_harness / tag
        if dest in self._ready:
            return dest
        stamp = dest / ".ahe-commit"
        if stamp.exists() and stamp.read_text().strip() == commit:
            self._ready.add(dest)
            return dest
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(self.repo.path), "archive", commit], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True, capture_output=True)
        stamp.write_text(commit + "\n")
        self._ready.add(dest)
        return dest

    def trial_dir(self, task: str, tag: str, n: int) -> Path:
        return self.folder.reeval / task / tag / f"trial-{n}"

    def spent_on(self, task: str) -> int:
        return sum(len(v) for (t, _tag), v in self._counts.items() if t == task)

    def have(self, task: str, tag: str) -> Counts:
        got = self._counts.get((task, tag), [])
        return Counts(sum(got), len(got))

    async def run(self, requests: list[tuple[str, str, int]]) -> None:
        """Bring each (task, tag) to n trials; stops asking when the budget is spent."""
        specs: list[TrialSpec] = []
        for task, tag, n in requests:
            got = self._counts.setdefault((task, tag), [])
            for i in range(len(got) + 1, n + 1):
                if self.spent >= self.budget:
                    break
                self.spent += 1
                tdir = self.trial_dir(task, tag, i)
                prev = load_result(tdir)
                if prev is not None and not prev.infra:  # finished in an earlier session: never re-run
                    got.append(prev.passed)
                    self.usage = self.usage.add(prev.usage)
                    continue
                specs.append(self._spec(task, tag, i, tdir, attempt=(prev.attempt + 1) if prev else 1))
        if not specs:
            return
        results = await self.executor.run(specs)
        for spec, res in zip(specs, results):
            if res is None or res.infra:  # not counted as evidence; the budget stays spent
                continue
            self.ran += 1
            self.usage = self.usage.add(res.usage)
            self._counts.setdefault((spec.task_name, spec.trial_dir.parent.name), []).append(res.passed)

    def _spec(self, task: str, tag: str, n: int, tdir: Path, *, attempt: int) -> TrialSpec:
        return TrialSpec(
            **self.rollout.trial_settings(),
            seal_dir=self.rollout.seal_dir,  # judged by the run's sealed verifiers, like its rollouts
            task_dir=self.task_dirs[task],
            task_name=task,
            trial=n,
            trial_dir=tdir,
            workspace=self.harness(tag).resolve(),
            agent_role=self.rollout.agent_role,
            attempt=attempt,
        )


def make_reevaluator(repo: HarnessRepo, folder: IterationFolder, rollout: RolloutConfig, executor: Executor, *, budget: int) -> Reevaluator:
    """A re-evaluator for one iteration; the tasks are loaded once (the same folders as the rollout)."""
    return Reevaluator(repo=repo, folder=folder, rollout=rollout, executor=executor,
                       task_dirs=_task_dirs(Path(rollout.tasks_dir), tuple(rollout.include or ())), budget=budget)


_TASK_DIRS: dict[tuple[str, tuple[str, ...], int], dict[str, Path]] = {}


def _task_dirs(tasks_dir: Path, include: tuple[str, ...]) -> dict[str, Path]:
    """Task name -> folder, loaded once per task folder and listing (its mtime changes when a task is added or removed)."""
    from ahe.tasks import load_tasks

    try:
        key = (str(tasks_dir.resolve()), include, tasks_dir.stat().st_mtime_ns)
    except OSError:
        key = None
    if key is not None and key in _TASK_DIRS:
        return _TASK_DIRS[key]
    loaded = load_tasks(tasks_dir, include=list(include) or None)
    dirs = {t.name: t.path for t in loaded.tasks}
    if key is not None:
        _TASK_DIRS[key] = dirs
    return dirs
