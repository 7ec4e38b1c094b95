"""The trace-as-files corpus: `<iteration>/corpus/`, built from `<iteration>/rollouts/`.

Layout (docs/debugger.md)::

    corpus/index.md                          one line per task: outcome, trials, where to start
    corpus/_shared/system-<sha>.md           system prompts, once each (steps point here)
    corpus/<task>/divergence.md              first step where a passing and a failing trial differ
    corpus/<task>/<trial>/index.md           the trial's outcome, then one line per step (with its lines)
    corpus/<task>/<trial>/steps.md           every step: assistant text, tool calls, results
    corpus/<task>/<trial>/step-NNN.md        (a name, not a file) one step = its lines of steps.md
    corpus/<task>/<trial>/sub_agents/<NN-name>/...   the same for a sub-agent's session

Steps are packed (`debugger.steps`): a file per step made the build as slow as the file
system creates files. Every reader resolves `step-NNN.md` to its lines.

A task (all its trials) is the unit of work: repeats are referenced within a task and the
divergence note compares its trials. With enough data, tasks are spread over worker
processes (`python -m debugger.corpus --worker`, one per core, jobs and results pickled
over pipes — no fork of a threaded parent, no re-import of the caller's main module). The
corpus is built in `.corpus.tmp-<pid>/` and swapped in with one rename at the end, so a
reader never sees half of it, and a killed build leaves no `corpus/` that looks complete
(the next build sweeps the half-built folder). Nothing is fsynced: the corpus is derived
data, rebuilt from `rollouts/` whenever the debug phase runs again (a resumed run re-runs an
unfinished phase). The previous corpus is deleted in the background.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from debugger.clean import CleanConfig, Cleaner, CleanStats, estimate_tokens
from debugger.divergence import find_divergences, render_divergence
from debugger.facts import task_outcome
from debugger.render import natural_key
from debugger.trial import RESULT, SHARED, TRAJECTORY, Writer, build_trial

POOL_MIN_BYTES = 96 * 1024 * 1024  # below this (~1.5 s of work on one core) a worker process costs more (~0.25 s to start) than it saves
WRITER_THREADS = 1  # one thread creates files while the next steps render; more contend on the same folder


@dataclass
class TaskJob:
    task: str
    trials: list[tuple[str, str]]  # (trial name, trial folder)
    iteration_dir: str
    out_dir: str  # the corpus folder being built
    config: CleanConfig
    raw_bytes: int = 0


@dataclass
class CorpusBuild:
    """What building the corpus produced; the per-task outputs feed facts.json."""

    tasks: list[dict[str, Any]]
    raw_bytes: int = 0
    corpus_bytes: int = 0
    steps: int = 0
    files: int = 0
    seconds: float = 0.0
    workers: int = 1
    clean: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def raw_tokens(self) -> int:
        return estimate_tokens(self.raw_bytes)

    @property
    def corpus_tokens(self) -> int:
        return estimate_tokens(self.corpus_bytes)

    @property
    def ratio(self) -> float:
        return self.raw_bytes / self.corpus_bytes if self.corpus_bytes else 0.0

    @property
    def mb_per_sec(self) -> float:
        return self.raw_bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        return (f"corpus: {self.raw_bytes / 1e6:.1f} MB of traces → {self.corpus_bytes / 1e6:.1f} MB; "
                f"tokens {self.raw_tokens:,} raw → {self.corpus_tokens:,} corpus (raw/corpus ×{self.ratio:.1f}); "
                f"{self.steps:,} steps, {self.files:,} files in {self.seconds:.2f} s "
                f"({self.mb_per_sec:.0f} MB/s, {self.workers} worker(s))")


def discover(iteration_dir: Path) -> list[tuple[str, list[tuple[str, str]]]]:
    """[(task, [(trial, folder)])] under rollouts/, in natural order."""
    root = Path(iteration_dir) / "rollouts"
    out: list[tuple[str, list[tuple[str, str]]]] = []
    if not root.is_dir():
        return out
    for task_dir in sorted((d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")), key=lambda d: d.name):
        trials = [(d.name, str(d)) for d in task_dir.iterdir()
                  if d.is_dir() and ((d / TRAJECTORY).is_file() or (d / RESULT).is_file())]
        if trials:
            out.append((task_dir.name, sorted(trials, key=lambda t: natural_key(t[0]))))
    return out


def build_task(job: TaskJob, writer: Writer | None = None) -> dict[str, Any]:
    """Corpus, facts and divergence of one task. Never raises: problems are listed in `errors`."""
    own = writer is None
    writer = writer or Writer(WRITER_THREADS)
    cleaner = Cleaner(job.config)
    trials, turns, errors = [], [], []
    stats = {"raw_bytes": 0, "corpus_bytes": 0, "steps": 0, "files": 0}
    try:
        for name, folder in job.trials:
            try:
                f, t, s = build_trial(task=job.task, trial=name, folder=folder, iteration_dir=job.iteration_dir,
                                      corpus_root=job.out_dir, cleaner=cleaner, writer=writer)
            except Exception as exc:  # a bug or an odd file must not lose the other trials
                errors.append(f"{job.task}/{name}: {type(exc).__name__}: {exc}"[:400])
                continue
            trials.append(f)
            turns.append(t)
            for k in stats:
                stats[k] += s[k]
            if f.get("read_error"):
                errors.append(f"{job.task}/{name}: {f['read_error']}")
        divs = find_divergences(job.task, turns)
        note = None
        if divs:
            note = f"corpus/{job.task}/divergence.md"
            os.makedirs(os.path.join(job.out_dir, job.task), exist_ok=True)
            stats["corpus_bytes"] += writer.write(os.path.join(job.out_dir, job.task, "divergence.md"),
                                                  render_divergence(job.task, turns, divs))
            stats["files"] += 1
    finally:
        if own:
            writer.close()
    return {"task": job.task, "trials": trials, "divergence": [d.as_dict() for d in divs], "divergence_note": note,
            "stats": stats, "clean": cleaner.stats.as_dict(), "errors": errors}


def build_tasks(jobs: list[TaskJob]) -> list[dict[str, Any]]:
    """Several tasks in this process, sharing one writer."""
    writer = Writer(WRITER_THREADS)
    try:
        return [build_task(j, writer) for j in jobs]
    finally:
        writer.close()


def _partition(jobs: list[TaskJob], n: int) -> list[list[TaskJob]]:
    """Largest first onto the lightest bin: balanced by bytes of trajectory."""
    bins: list[list[TaskJob]] = [[] for _ in range(n)]
    loads = [0] * n
    for job in sorted(jobs, key=lambda j: -j.raw_bytes):
        i = loads.index(min(loads))
        bins[i].append(job)
        loads[i] += job.raw_bytes + 1
    return [b for b in bins if b]


def _run_workers(jobs: list[TaskJob], n: int) -> list[dict[str, Any]]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    procs = []
    for part in _partition(jobs, n):
        p = subprocess.Popen([sys.executable, "-m", "debugger.corpus", "--worker"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        procs.append((p, part))
    outputs: list[dict[str, Any]] = []
    results: list[Any] = [None] * len(procs)

    def talk(i: int) -> None:
        p, part = procs[i]
        out, err = p.communicate(pickle.dumps(part, protocol=pickle.HIGHEST_PROTOCOL))
        results[i] = (p.returncode, out, err)

    threads = [threading.Thread(target=talk, args=(i,)) for i in range(len(procs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for (p, part), (code, out, err) in zip(procs, results):
        if code != 0:
            raise RuntimeError(f"corpus worker failed (exit {code}): {err.decode(errors='replace')[-500:]}")
        outputs.extend(pickle.loads(out))
    return outputs


def _root_index(outputs: list[dict[str, Any]]) -> str:
    lines = ["# Corpus", "",
             "Cleaned traces. Start from a trial's index.md; cite steps as corpus/<task>/<trial>/step-NNN.md "
             "(each is a few lines of the trial's steps.md; the index gives which).", ""]
    for o in outputs:
        flags = [t["passed"] for t in o["trials"]]
        passed = sum(1 for p in flags if p)
        known = sum(1 for p in flags if p is not None)
        parts = [f"- {o['task']}: {task_outcome(flags)} ({passed}/{known} passed)",
                 "trials: " + ", ".join(f"corpus/{o['task']}/{t['trial']}/index.md" for t in o["trials"])]
        if o["divergence_note"]:
            parts.append(f"divergence: {o['divergence_note']}")
        lines.append(" · ".join(parts))
    return "\n".join(lines) + "\n"


def build_corpus(iteration_dir: Path, *, config: CleanConfig | None = None, workers: int | None = None) -> CorpusBuild:
    """Build `<iteration_dir>/corpus` from `<iteration_dir>/rollouts`; returns the per-task outputs.

    `workers`: processes to use (default: one per core when there are at least 96 MB of
    trajectories, else 1 — in this process). Raw traces are only read.
    """
    t0 = time.perf_counter()
    iteration_dir = Path(iteration_dir).resolve()
    config = config or CleanConfig()
    final = iteration_dir / "corpus"
    tmp = iteration_dir / f".corpus.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    jobs = []
    for task, trials in discover(iteration_dir):
        size = 0
        for _, folder in trials:
            try:
                size += os.stat(os.path.join(folder, TRAJECTORY)).st_size
            except OSError:
                pass
        jobs.append(TaskJob(task, trials, str(iteration_dir), str(tmp), config, size))
    total = sum(j.raw_bytes for j in jobs)
    if workers is None:
        workers = (os.cpu_count() or 1) if total >= POOL_MIN_BYTES else 1
    workers = max(1, min(workers, len(jobs) or 1))
    build_errors: list[str] = []
    if workers > 1:
        try:
            outputs = _run_workers(jobs, workers)
        except Exception as exc:  # never lose the phase to the pool: do it here instead
            build_errors.append(f"worker processes failed, built in this process instead: {exc}"[:500])
            workers = 1
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            outputs = build_tasks(jobs)
    else:
        outputs = build_tasks(jobs)
    outputs.sort(key=lambda o: o["task"])
    build = CorpusBuild(tasks=outputs, workers=workers, errors=build_errors)
    clean = CleanStats()
    for o in outputs:
        for k in ("raw_bytes", "corpus_bytes", "steps", "files"):
            setattr(build, k, getattr(build, k) + o["stats"][k])
        build.errors.extend(o["errors"])
        clean.add(CleanStats(**o["clean"]))
    shared = tmp / SHARED
    if shared.is_dir():
        for f in shared.iterdir():
            build.corpus_bytes += f.stat().st_size
            build.files += 1
    index = _root_index(outputs).encode("utf-8")
    (tmp / "index.md").write_bytes(index)
    build.corpus_bytes += len(index)
    build.files += 1
    build.clean = clean.as_dict()
    # left by a killed build: a half-built corpus, or a previous one not yet deleted
    trash = [p for p in iteration_dir.glob(".corpus.old-*") if p.is_dir()]
    trash += [p for p in iteration_dir.glob(".corpus.tmp-*") if p != tmp and p.is_dir() and not _alive(p.name.rsplit("-", 1)[-1])]
    if final.exists():
        old = iteration_dir / f".corpus.old-{os.getpid()}-{time.monotonic_ns()}"
        os.replace(final, old)
        trash.append(old)
    os.replace(tmp, final)
    if trash:  # not a daemon thread: it finishes before the interpreter exits
        threading.Thread(target=_remove_all, args=(trash,), name="corpus-cleanup").start()
    build.seconds = time.perf_counter() - t0
    return build


def _alive(pid: str) -> bool:
    """Is the process that owns a .corpus.tmp-<pid> folder still running (building it)?"""
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _remove_all(paths: list[Path]) -> None:
    for p in paths:
        shutil.rmtree(p, ignore_errors=True)


def _worker_main() -> None:
    jobs = pickle.loads(sys.stdin.buffer.read())
    out = build_tasks(jobs)
    sys.stdout.buffer.write(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        _worker_main()
    else:  # pragma: no cover - a convenience: python -m debugger.corpus ITERATION_DIR
        b = build_corpus(Path(sys.argv[1]))
        print(b.line())
