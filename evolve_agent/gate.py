"""The validation gate: every recorded change is checked before any rollout sees it.

For each change, in the order it was recorded, the gate builds the harness it would produce —
the base plus the changes accepted so far plus this one — in a scratch clone (cherry-pick of
the change's commit), and checks:

1. the change's commit touches exactly the manifest entry's `files`;
2. the protected parts are intact (`evolve_agent.protected`);
3. the workspace loads in the runtime (`load_agent`), or, for a harness another agent backend
   runs (harness.yaml, docs/backends.md), as that backend loads it (its backend unchanged);
4. every tool, middleware, skill and sub-agent works in a smoke session (`evolve_agent.smoke`);
   another backend's harness runs one session of its own smoke policy (`evolve_agent.backend_smoke`);
5. the leakage lint finds nothing of the tasks' names, tests or solutions in the lines the
   change adds (`evolve_agent.leakage`).

A change that fails is reverted in the live repository, its edits are put back as uncommitted
changes, and it goes back to the evolve agent once (`repair`) with the exact errors. If the
agent records it again, the new commit is checked the same way; if it still fails (or is not
recorded again) it is reverted and marked `rejected` with `gate_errors`. Passing changes are
marked `accepted`. The live repository ends as the base plus the accepted changes.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Awaitable, Callable

import git

from ahe.harness.repo import IDENTITY, HarnessRepo
from ahe.tempdirs import make_temp_dir
from evolve_agent.context import discard_all
from evolve_agent.leakage import LeakIndex, added_lines
from ahe.harness.manifest import ChangeEntry, Manifest
from evolve_agent.protected import BaseSnapshot
from evolve_agent.smoke import smoke_check
from evolve_agent.workspace_load import load_problem, probe_problem, purge_pycache

log = logging.getLogger(__name__)

RepairFn = Callable[[ChangeEntry, list[str]], Awaitable[ChangeEntry | None]]
MAX_PUBLIC_BYTES = 512 * 1024


class ScratchTree:
    """A throwaway clone (objects shared with the live repository) to build candidate trees."""

    def __init__(self, source: Path, base: str) -> None:
        self.path = make_temp_dir("gate")
        try:
            self.repo = git.Repo.clone_from(str(source), str(self.path), shared=True, no_checkout=True)
        except BaseException:
            shutil.rmtree(self.path, ignore_errors=True)
            raise
        with self.repo.config_writer() as cw:
            cw.set_value("user", "name", IDENTITY[0])
            cw.set_value("user", "email", IDENTITY[1])
            cw.set_value("commit", "gpgsign", "false")
        self.git = self.repo.git
        self.git.checkout("-q", "--detach", base)

    def reset(self, commit: str) -> None:
        self.git.reset("--hard", "-q", commit)
        self.git.clean("-fdxq")

    def apply(self, commit: str) -> str | None:
        """Cherry-pick `commit` without committing; the git error when it does not apply."""
        try:
            self.git.cherry_pick("--no-commit", commit)
            purge_pycache(self.path)
            return None
        except git.GitCommandError as exc:
            detail = (exc.stderr or exc.stdout or str(exc)).strip().splitlines()
            try:
                self.git.cherry_pick("--abort")
            except git.GitCommandError:
                pass
            self.git.reset("--hard", "-q")
            return " ".join(line.strip() for line in detail[-3:])

    def commit(self, message: str) -> str:
        self.git.commit("-q", "--allow-empty", "--no-verify", "-m", message)
        return self.repo.head.commit.hexsha

    def tree(self, rev: str) -> str:
        return self.git.rev_parse(f"{rev}^{{tree}}")

    def close(self) -> None:
        try:
            self.repo.close()
        finally:
            shutil.rmtree(self.path, ignore_errors=True)


def _public_text(root: Path) -> str:
    """The base harness's text: never a leak, whatever the tasks contain."""
    parts, size = [], 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", "__pycache__")]
        for name in filenames:
            p = Path(dirpath) / name
            try:
                data = p.read_bytes()
            except OSError:
                continue
            if b"\x00" in data[:4096]:
                continue
            parts.append(data.decode("utf-8", errors="replace"))
            size += len(data)
            if size > MAX_PUBLIC_BYTES:
                return "\n".join(parts)
    return "\n".join(parts)


class Gate:
    """Checks changes against a base commit. Build one per evolve phase."""

    def __init__(self, repo: HarnessRepo, base_commit: str, *, tasks_dir: Path | None = None,
                 smoke_url: str | None = None, smoke_timeout_sec: float = 60, trace_dir: Path | None = None,
                 smoke: bool = True) -> None:
        self.repo = repo
        self.smoke = smoke  # False only for changes that register no component (the decision simulator)
        self.base_commit = base_commit
        self.base = BaseSnapshot.from_commit(repo, base_commit)
        self.smoke_url = smoke_url
        self.smoke_timeout_sec = smoke_timeout_sec
        self.trace_dir = Path(trace_dir) if trace_dir else None
        self.notes: list[str] = []
        self.scratch = ScratchTree(repo.path, base_commit)
        self.accepted_head = base_commit
        self.leaks: LeakIndex | None = None
        try:
            if tasks_dir is None:
                self.notes.append("leakage lint skipped: no task folder was given")
            else:
                self.leaks = LeakIndex.from_tasks(Path(tasks_dir), public_text=_public_text(self.scratch.path))
                if self.leaks.n_tasks == 0:
                    self.notes.append(f"leakage lint found no task folders under {tasks_dir}")
        except BaseException:
            self.scratch.close()  # the scratch clone never outlives a gate that failed to build
            raise

    def close(self) -> None:
        self.scratch.close()

    # ------------------------------------------------------------------ one check
    async def check(self, entry: ChangeEntry, label: str) -> tuple[list[str], list[str]]:
        """(errors, warnings) of `entry.commit` on top of the changes accepted so far."""
        errors: list[str] = []
        commit = entry.commit
        if not commit:
            return [f"{entry.id} has no commit"], []
        try:
            touched = self.repo.files_in_commit(commit)
        except Exception as exc:
            return [f"commit {commit} of {entry.id} cannot be read: {exc}"], []
        if sorted(set(touched)) != sorted(set(entry.files)):
            errors.append(f"the commit changes {sorted(touched)} but the manifest entry lists {sorted(entry.files)}")
        self.scratch.reset(self.accepted_head)
        conflict = self.scratch.apply(commit)
        if conflict is not None:
            return errors + [f"the change does not apply on top of the accepted changes: {conflict}"], []
        tree = self.scratch.path
        errors += self.base.check_tree(tree, files=touched)
        if any(f == ".git" or f.startswith(".git/") for f in touched):
            errors.append("the change touches .git")
        warnings: list[str] = []
        backend, backend_err = self._backend_of(tree)
        if backend_err:
            errors.append(f"the workspace does not load: {backend_err}")
        else:
            more, warnings = await self._load_and_smoke(tree, backend, label)
            errors += more
        if self.leaks is not None:
            diff = self.repo.repo.git.show(commit, "--format=", "--no-color", "--no-ext-diff", "--unified=0")
            errors += [f.message() for f in self.leaks.lint(added_lines(diff))]
        return errors, warnings

    async def _load_and_smoke(self, tree: Path, backend: object | None, label: str) -> tuple[list[str], list[str]]:
        """(errors, warnings) of loading the candidate and, when on, its smoke session. For an `ahe`
        harness the smoke session's worker is the load check (one worker, not two)."""
        if backend is None:
            if not self.smoke:
                return _not_loading(load_problem(tree)), []
            problem = probe_problem(tree)
            report = None if problem else await smoke_check(
                tree, url=self.smoke_url, timeout_sec=self.smoke_timeout_sec, trace_dir=self._fresh_trace(label))
            problem = problem or report.load_problem
        else:
            problem = await backend.load_problem(tree)
            if problem or not self.smoke:
                await backend.aclose()
                return _not_loading(problem), []
            from evolve_agent.backend_smoke import backend_smoke_check

            report = await backend_smoke_check(backend, tree, timeout_sec=self.smoke_timeout_sec,
                                               trace_dir=self._fresh_trace(label))
        if problem:
            return _not_loading(problem), []
        return [f"smoke: {e}" for e in report.errors], [f"smoke: {w}" for w in report.warnings]

    def _fresh_trace(self, label: str) -> Path | None:
        trace = self.trace_dir / label if self.trace_dir else None
        if trace is not None and trace.exists():
            shutil.rmtree(trace, ignore_errors=True)
        return trace

    def _backend_of(self, tree: Path) -> tuple[object | None, str | None]:
        """(None, None) for an `ahe` harness (today's checks); (backend, None) for another agent
        backend; (None, why) when harness.yaml is broken."""
        from ahe.agents import backend_name, make_agent_backend
        from ahe.errors import AheError

        try:
            name = backend_name(tree)  # a changed backend is refused by the protected checks
        except AheError as exc:
            return None, str(exc)
        return (None, None) if name == "ahe" else (make_agent_backend(name), None)

    def keep(self, entry: ChangeEntry) -> None:
        """Make the candidate built by the last `check` the new accepted state."""
        self.accepted_head = self.scratch.commit(f"{entry.id} (gate: accepted)")

    def live_matches_accepted(self) -> list[str]:
        """Files where the live workspace differs from base + accepted changes (normally none)."""
        head = self.repo.head()
        if self.scratch.tree(self.accepted_head) == self.scratch.tree(head):
            return []
        out = self.scratch.git.diff("--name-only", self.accepted_head, head)
        return [x for x in out.splitlines() if x]


def _revert(repo: HarnessRepo, entry: ChangeEntry, commit: str, why: str) -> str | None:
    try:
        out = repo.revert(commit, f"gate: reject {entry.id} ({why[:120]})\n\nReverts {commit}.")
        return out.commit
    except Exception as exc:  # recorded; the final consistency check reports what is left
        entry.gate_errors.append(f"could not revert {commit}: {exc}")
        return None


def _restore_as_uncommitted(repo: HarnessRepo, files: list[str], source: str) -> None:
    """Put the change's version of `files` back into the working tree, unstaged."""
    g = repo.repo.git
    for f in files:
        if repo.show_file(source, f) is None:
            p = repo.path / f
            if p.is_symlink() or p.is_file():
                p.unlink()
        else:
            g.checkout(source, "--", f)
            g.reset("-q", "--", f)


async def run_gate(repo: HarnessRepo, manifest: Manifest, *, base_commit: str | None = None,
                   tasks_dir: Path | None = None, smoke_url: str | None = None, repair: RepairFn | None = None,
                   smoke_timeout_sec: float = 60, trace_dir: Path | None = None, smoke: bool = True) -> Manifest:
    """Check every `recorded` change of `manifest` in order; updates and returns it."""
    base_commit = base_commit or manifest.base_commit
    pending = [c for c in manifest.changes if c.status == "recorded"]
    if not pending:
        return manifest
    gate = Gate(repo, base_commit, tasks_dir=tasks_dir, smoke_url=smoke_url, smoke_timeout_sec=smoke_timeout_sec,
                trace_dir=trace_dir, smoke=smoke)
    manifest.gate_notes += gate.notes
    try:
        for entry in pending:
            try:
                final = await _gate_one(gate, repo, entry, repair)
            except Exception as exc:  # a failure of the gate itself never lets a change through
                log.exception("the gate failed on %s", entry.id)
                final = entry
                final.status = "rejected"
                final.gate_errors.append(f"the gate itself failed: {type(exc).__name__}: {exc}")
                if final.commit and not final.revert_commits:
                    rc = _revert(repo, final, final.commit, "gate failure")
                    if rc:
                        final.revert_commits.append(rc)
            idx = next(i for i, c in enumerate(manifest.changes) if c is entry)
            manifest.changes[idx] = final
        drift = gate.live_matches_accepted()
        if drift:
            manifest.gate_notes.append(f"the workspace differs from base + accepted changes in {drift}")
    finally:
        gate.close()
    return manifest


async def _gate_one(gate: Gate, repo: HarnessRepo, entry: ChangeEntry, repair: RepairFn | None) -> ChangeEntry:
    errors, warnings = await gate.check(entry, entry.id)
    if not errors:
        gate.keep(entry)
        entry.status, entry.gate_warnings = "accepted", warnings
        return entry

    # First failure: revert it, hand the edit back to the agent once, with the exact errors.
    first_commit = entry.commit
    assert first_commit is not None
    before = repo.head()
    rc = _revert(repo, entry, first_commit, errors[0])
    if rc:
        entry.revert_commits.append(rc)
    redo = None
    if repair is not None and rc:
        _restore_as_uncommitted(repo, repo.files_in_commit(first_commit), before)
        try:
            redo = await repair(entry, errors)
        finally:
            discard_all(repo)
    first = [f"attempt 1 ({first_commit[:10]}): {e}" for e in errors]
    if redo is None or not redo.commit:
        entry.status = "rejected"
        entry.gate_errors = first + entry.gate_errors + ["not repaired: the change was not recorded again after the gate's report"]
        entry.gate_warnings = warnings
        return entry

    redo.superseded_commits = entry.superseded_commits + [first_commit]
    redo.revert_commits = list(entry.revert_commits)
    errors2, warnings2 = await gate.check(redo, f"{entry.id}-repair")
    if not errors2:
        gate.keep(redo)
        redo.status, redo.gate_warnings = "accepted", warnings2
        return redo
    rc2 = _revert(repo, redo, redo.commit, errors2[0])  # type: ignore[arg-type]
    if rc2:
        redo.revert_commits.append(rc2)
    redo.status = "rejected"
    redo.gate_errors = first + [f"attempt 2 ({redo.commit[:10]}): {e}" for e in errors2] + redo.gate_errors  # type: ignore[index]
    redo.gate_warnings = warnings2
    return redo


def _not_loading(problem: str | None) -> list[str]:
    return [f"the workspace does not load: {problem}"] if problem else []
