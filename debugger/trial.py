"""One trial into corpus files: its steps (packed in steps.md), the index, the facts, the turns.

A single pass over the trajectory's steps renders each step (cleaned), adds its line (with
the step's lines in steps.md, see `debugger.steps`) to the index, feeds the facts collector
and records the turn signatures used for the divergence note. Files are handed to a
`Writer`, whose thread writes them while the next trial is rendered.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from debugger.clean import Cleaner
from debugger.divergence import TrialTurns, Turn, action_signature
from debugger.facts import TrialFacts
from debugger.render import args_text, call_summary, command_key, content_text, fence, natural_key, one_line
from debugger.steps import STEPS, entry_line

try:  # optional: about three times faster than the standard library on big trajectories
    import orjson as _orjson

    _loads = _orjson.loads
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads

TRAJECTORY = "trajectory.json"
RESULT = "result.json"
SHARED = "_shared"
_EXEC_FILE = re.compile(r"/logs/exec/\d+\.(?:stdout|stderr)")
_EVENT_KINDS = (b"llm_retry", b"middleware_error", b"tool_args_repaired")
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


def _write_bytes(path: str, data: bytes) -> None:
    fd = os.open(path, _FLAGS, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    finally:
        os.close(fd)


class Writer:
    """Creates files in a background thread, a batch at a time; `close()` waits and raises the first error.

    Files are queued by `write` and handed over by `flush` (called after each trial): one
    job per batch keeps the per-file overhead to the system calls themselves.
    """

    def __init__(self, threads: int = 1) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="corpus-writer") if threads > 0 else None
        self._pending: list[Future] = []
        self._batch: list[tuple[str, bytes]] = []

    def write(self, path: str, text: str) -> int:
        data = text.encode("utf-8", "surrogatepass")
        if self._pool is None:
            _write_bytes(path, data)
        else:
            self._batch.append((path, data))
        return len(data)

    def flush(self) -> None:
        if self._batch and self._pool is not None:
            batch, self._batch = self._batch, []
            self._pending.append(self._pool.submit(_write_all, batch))
            if len(self._pending) > 64:
                self._drain(keep=16)

    def _drain(self, keep: int = 0) -> None:
        while len(self._pending) > keep:
            self._pending.pop(0).result()

    def close(self) -> None:
        try:
            self.flush()
            self._drain()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)


def _write_all(batch: list[tuple[str, bytes]]) -> None:
    for path, data in batch:
        _write_bytes(path, data)


def read_json(path: str) -> tuple[Any, int]:
    with open(path, "rb") as f:
        data = f.read()
    return _loads(data), len(data)


def count_events(path: str) -> dict[str, int]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    return {k.decode(): data.count(b'"type": "' + k + b'"') for k in _EVENT_KINDS}


class Session:
    """Renders one session (a trial, or a sub-agent run inside it) into its corpus folder."""

    def __init__(self, *, cleaner: Cleaner, writer: Writer, iteration_dir: str, corpus_root: str, src: str,
                 out: str, label: str, corpus_rel: str, facts: TrialFacts | None) -> None:
        self.cleaner, self.writer = cleaner, writer
        self.iteration_dir, self.corpus_root = iteration_dir, corpus_root
        self.src, self.out, self.label, self.corpus_rel, self.facts = src, out, label, corpus_rel, facts
        self.raw_rel = os.path.relpath(os.path.join(src, TRAJECTORY), iteration_dir)
        self.bytes = self.steps = self.files = 0
        self.turns: list[Turn] = []
        self.width = 3
        self._max = cleaner.config.max_chars

    def clean(self, text: str, ref: str | None, pointer: str, dedup: bool = True):
        if len(text) > self._max and "/logs/exec/" in text:
            m = _EXEC_FILE.search(text)  # the sandbox kept the full output of that command
            if m:
                host = os.path.join(self.src, "root", m.group(0).lstrip("/"))
                if os.path.isfile(host):
                    pointer += f"; sandbox file: {os.path.relpath(host, self.iteration_dir)}"
        return self.cleaner.clean(text, ref=ref, raw_pointer=pointer, dedup=dedup)

    @staticmethod
    def marks(c: Any) -> str:
        if not (c.dup_of or c.blobs or c.binary or c.truncated):
            return ""
        m = []
        if c.dup_of:
            m.append("[= " + c.dup_of.removeprefix("corpus/").split(" ")[0] + "]")
        if c.blobs:
            m.append(f"[base64×{c.blobs}]")
        if c.binary:
            m.append("[binary]")
        if c.truncated:
            m.append(f"[cut {c.truncated:,}]")
        return " " + " ".join(m)

    def run(self, traj: dict[str, Any]) -> list[str]:
        steps = traj.get("steps")
        if not isinstance(steps, list):
            raise ValueError("no 'steps' list (not an ATIF trajectory)")
        ids = [s.get("step_id") if s.__class__ is dict and s.get("step_id").__class__ is int else i + 1
               for i, s in enumerate(steps)]
        self.width = width = max(3, len(str(max(ids, default=1))))
        os.makedirs(self.out, exist_ok=True)
        lines, bodies, at = [], [], 1
        for sid, step in zip(ids, steps):
            if step.__class__ is not dict:
                continue
            self.steps += 1
            name = f"step-{sid:0{width}d}"
            body, line = self.step(sid, name, step)
            bodies.append(body)
            n = body.count("\n")  # every body ends with a newline; readers split on '\n' alone
            lines.append(entry_line(name, at, at + n - 1, line))
            at += n
        if bodies:  # one file for all the steps: creating a file per step was the build's cost
            self.bytes += self.writer.write(f"{self.out}/{STEPS}", "".join(bodies))
            self.files += 1
        return lines

    def step(self, sid: int, name: str, step: dict[str, Any]) -> tuple[str, str]:
        source = str(step.get("source") or "?")
        text, _ = content_text(step.get("message"))
        head = f"# {self.label} · step {sid:0{self.width}d} · {source}"
        ptr = f"{self.raw_rel}, step {sid}"
        if source == "agent":
            return self.agent(sid, name, step, head, text, ptr)
        if source == "system":
            return self.system(head, text)
        extra = step.get("extra") if step.get("extra").__class__ is dict else {}
        note = f" (framework note from {extra.get('middleware', 'middleware')})" if extra.get("framework_note") else ""
        c = self.clean(text, f"{self.corpus_rel}/{name}.md", ptr)
        return (f"{head}{note}\n\n{fence(c.text)}\n",
                f"{source:<6} {'[note] ' if note else ''}{one_line(c.text)}{self.marks(c)}")

    def system(self, head: str, text: str) -> tuple[str, str]:
        if len(text) < self.cleaner.config.min_dedup_chars:
            return f"{head}\n\n{fence(text)}\n", f"system {one_line(text)}"
        digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        shared_dir = os.path.join(self.corpus_root, SHARED)
        shared = os.path.join(shared_dir, f"system-{digest}.md")
        if not os.path.exists(shared):  # written once; several workers may race, with equal content
            os.makedirs(shared_dir, exist_ok=True)
            tmp = f"{shared}.{os.getpid()}.tmp"
            _write_bytes(tmp, f"# System prompt {digest}\n\n{fence(text)}\n".encode("utf-8", "surrogatepass"))
            os.replace(tmp, shared)
        ref = f"corpus/{SHARED}/system-{digest}.md"
        return (f"{head}\n\nSystem prompt, {len(text):,} characters, kept once for the whole corpus: {ref}\n",
                f"system system prompt ({len(text):,} chars) → {ref}")

    def agent(self, sid: int, name: str, step: dict[str, Any], head: str, text: str, ptr: str) -> tuple[str, str]:
        facts = self.facts
        turn = len(self.turns) + 1
        if facts is not None:
            facts.on_agent_step(step)
        parts = [f"{head} · turn {turn}"]
        m = step.get("metrics")
        info = [f"model {step['model_name']}"] if step.get("model_name") else []
        if m.__class__ is dict:
            info.append(f"tokens: prompt {m.get('prompt_tokens', 0)}, completion {m.get('completion_tokens', 0)}")
            mx = m.get("extra")
            if mx.__class__ is dict and mx.get("latency_sec") is not None:
                info.append(f"{mx['latency_sec']} s")
        if info:
            parts.append(" · ".join(info))
        summary: list[str] = []
        if text:
            c = self.clean(text, None, ptr + ", message", dedup=False)
            parts.append("## Assistant\n\n" + fence(c.text))
            summary.append(f"“{one_line(c.text, 80)}”{self.marks(c)}")
        reasoning = step.get("reasoning_content")
        if reasoning.__class__ is str and reasoning:
            c = self.clean(reasoning, None, ptr + ", reasoning", dedup=False)
            parts.append("## Reasoning\n\n" + fence(c.text))
        calls = [tc for tc in step.get("tool_calls") or () if tc.__class__ is dict]
        obs = step.get("observation")
        results = [r for r in (obs.get("results") or ()) if r.__class__ is dict] if obs.__class__ is dict else []
        by_id = {r.get("source_call_id"): i for i, r in enumerate(results) if r.get("source_call_id")}
        used: set[int] = set()
        observations, errors = [], []
        first = ""
        for k, tc in enumerate(calls, 1):
            tool = str(tc.get("function_name") or "?")
            cid = tc.get("tool_call_id") or ""
            args = tc.get("arguments")
            line = call_summary(tool, args, 100)
            if k == 1:
                first = line
            if facts is not None:
                facts.on_call(sid, tool, line)
            parts.append(f"## Tool call {k}: {tool} ({cid})\n\n" + self.render_args(args, f"{ptr}, tool call {k}"))
            j = by_id.get(cid) if cid else None
            if j is None and k - 1 < len(results) and (k - 1) not in used and not results[k - 1].get("source_call_id"):
                j = k - 1
            if j is None:
                parts.append(f"## Result {k}: {tool} ({cid})\n\n(no result recorded)")
                summary.append(f"{line} → (no result)")
                continue
            used.add(j)
            rendered, status, c, raw_text, is_err = self.result(sid, name, k, tool, cid, results[j], ptr)
            parts.append(rendered)
            observations.append(raw_text)
            errors.append(is_err)
            summary.append(f"{line} → {status}: {one_line(_after_exit_line(c.text), 80)}{self.marks(c)}")
        for j, res in enumerate(results):  # results that answer no call of this step
            if j in used:
                continue
            extra = res.get("extra") if res.get("extra").__class__ is dict else {}
            tool = str(extra.get("tool") or "?")
            rendered, status, c, _, _ = self.result(sid, name, j + 1, tool, res.get("source_call_id") or "", res, ptr)
            parts.append(rendered)
            summary.append(f"{tool} → {status}: {one_line(c.text, 80)}{self.marks(c)}")
        if not calls and not text:
            summary.append("(empty reply)")
        if calls:
            if len(calls) > 1:
                first += f" (+{len(calls) - 1} more call(s))"
        else:
            first = f"reply: {one_line(text, 100)}"
        self.turns.append(Turn(turn, sid, action_signature(calls, text), first, tuple(observations), tuple(errors)))
        return "\n\n".join(parts) + "\n", f"agent  t{turn} " + " ; ".join(summary)

    def render_args(self, args: Any, ptr: str) -> str:
        if args.__class__ is dict:
            key = command_key(args)
            if key:
                c = self.clean(args[key], None, f"{ptr}, argument {key}", dedup=False)
                out = fence(c.text, "bash")
                if len(args) > 1:
                    rest = {k: v for k, v in args.items() if k != key}
                    out += "\n\nother arguments: " + self.clean(args_text(rest), None, ptr, dedup=False).text
                return out
        c = self.clean(args_text(args), None, f"{ptr}, arguments", dedup=False)
        return fence(c.text, "json")

    def result(self, sid: int, name: str, k: int, tool: str, cid: str, res: dict[str, Any], ptr: str):
        text, _ = content_text(res.get("content"))
        extra = res.get("extra") if res.get("extra").__class__ is dict else {}
        is_err = bool(extra.get("is_error"))
        c = self.clean(text, f"{self.corpus_rel}/{name}.md (result {k})", f"{ptr}, result {k}")
        status = "ERROR" if is_err else "ok"
        if self.facts is not None:
            self.facts.on_result(sid, tool, text, is_err)
        head = text[:200]
        if "timed out" in head.lower():
            status = "TIMEOUT"
        elif head.startswith("exit code: ") and not head.startswith("exit code: 0"):
            status = "exit " + head[11:].split("\n", 1)[0].strip()
        tail = ""
        for ref in res.get("subagent_trajectory_ref") or extra.get("subagent_trajectory_ref") or ():
            path = ref.get("trajectory_path") if ref.__class__ is dict else None
            if path:
                tail += f"\n\nsub-agent trace: {self.corpus_rel}/{os.path.dirname(path)}/index.md"
        denied = " (denied by middleware)" if extra.get("denied") else ""
        return f"## Result {k}: {tool} ({cid}) — {status}{denied}\n\n{fence(c.text)}{tail}", status, c, text, is_err


def _after_exit_line(text: str) -> str:
    """The output without the seed shell's `exit code: N` first line (the status says it)."""
    if text.startswith("exit code: "):
        rest = text.partition("\n")[2]
        return rest or "(no output)"
    return text


def sub_sessions(root: str, prefix: str = "sub_agents") -> list[tuple[str, str]]:
    """[(folder, path relative to the trial)] of the sub-agent runs below `root`, nested ones too."""
    out = []
    for name in sorted((n for n in os.listdir(root) if os.path.isdir(os.path.join(root, n))), key=natural_key):
        d = os.path.join(root, name)
        if os.path.isfile(os.path.join(d, TRAJECTORY)):
            out.append((d, f"{prefix}/{name}"))
        if os.path.isdir(os.path.join(d, "sub_agents")):
            out.extend(sub_sessions(os.path.join(d, "sub_agents"), f"{prefix}/{name}/sub_agents"))
    return out


def build_trial(*, task: str, trial: str, folder: str, iteration_dir: str, corpus_root: str, cleaner: Cleaner,
                writer: Writer) -> tuple[dict[str, Any], TrialTurns, dict[str, int]]:
    """Corpus files and facts of one trial folder (rollouts/<task>/<trial>)."""
    out = os.path.join(corpus_root, task, trial)
    corpus_rel = f"corpus/{task}/{trial}"
    facts = TrialFacts(task, trial, f"{corpus_rel}/index.md", os.path.relpath(os.path.join(folder, TRAJECTORY), iteration_dir))
    result = None
    try:
        with open(os.path.join(folder, RESULT), "rb") as f:
            result = json.loads(f.read())
        if not isinstance(result, dict):
            result = None
    except (OSError, ValueError):
        result = None
    common = dict(cleaner=cleaner, writer=writer, iteration_dir=iteration_dir, corpus_root=corpus_root)
    session = Session(src=folder, out=out, label=f"{task}/{trial}", corpus_rel=corpus_rel, facts=facts, **common)
    traj, read_error, lines = None, None, []
    stats = {"raw_bytes": 0, "corpus_bytes": 0, "steps": 0, "files": 0}
    if os.path.isfile(os.path.join(folder, TRAJECTORY)):
        try:
            traj, stats["raw_bytes"] = read_json(os.path.join(folder, TRAJECTORY))
            if not isinstance(traj, dict):
                raise ValueError("not a JSON object")
            lines = session.run(traj)
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            read_error = f"unreadable trajectory: {type(exc).__name__}: {exc}"[:300]
            traj = None
    else:
        read_error = "no trajectory.json (the session never started, or the trial is unfinished)"
    facts.steps, facts.step_width = session.steps, session.width
    sub_lines = []
    if os.path.isdir(os.path.join(folder, "sub_agents")):
        for sub_dir, rel in sub_sessions(os.path.join(folder, "sub_agents")):
            try:
                sub_traj, n = read_json(os.path.join(sub_dir, TRAJECTORY))
                stats["raw_bytes"] += n
                sub = Session(src=sub_dir, out=f"{out}/{rel}", label=f"{task}/{trial}/{rel}", corpus_rel=f"{corpus_rel}/{rel}",
                              facts=None, **common)
                sub_index = sub.run(sub_traj)
                head = f"# Index — {task}/{trial}/{rel} (sub-agent)\n\nraw trajectory: {sub.raw_rel}\n\n"
                stats["corpus_bytes"] += sub.bytes + writer.write(f"{out}/{rel}/index.md", head + "\n".join(sub_index) + "\n")
                stats["files"] += sub.files + 1
                stats["steps"] += sub.steps
                facts.sub_agents += 1
                sub_lines.append(f"- {corpus_rel}/{rel}/index.md ({sub.steps} steps)")
            except (OSError, ValueError, TypeError, AttributeError) as exc:
                sub_lines.append(f"- {rel}: unreadable ({type(exc).__name__}: {exc})"[:300])
    f = facts.finish(traj, result, count_events(os.path.join(folder, "events.jsonl")), read_error)
    os.makedirs(out, exist_ok=True)
    index = index_text(task, trial, f, session.raw_rel, lines, sub_lines, read_error)
    stats["corpus_bytes"] += session.bytes + writer.write(f"{out}/index.md", index)
    stats["files"] += session.files + 1
    stats["steps"] += session.steps
    writer.flush()
    return f, TrialTurns(trial, f["passed"], session.width, session.turns), stats


def index_text(task: str, trial: str, f: dict[str, Any], raw: str, lines: list[str], subs: list[str],
               read_error: str | None) -> str:
    verdict = {True: "PASSED", False: "FAILED", None: "UNKNOWN"}[f["passed"]]
    bits = [verdict]
    if f["reward"] is not None:
        bits.append(f"reward {f['reward']:g}")
    if f["failure_kind"] not in ("passed", "unknown", "wrong_answer"):
        bits.append(f["failure_kind"])
    if f["stop_reason"]:
        bits.append(f"stop {f['stop_reason']}")
    bits += [f"{f['turns']} turns", f"{f['tokens']['total']:,} tokens",
             f"{f['tool_calls']} tool calls ({f['failed_tool_calls']} failed)"]
    if f["duration_sec"] is not None:
        bits.append(f"{float(f['duration_sec']):.1f} s")
    out = [f"# Index — {task}/{trial}", "", "outcome: " + " · ".join(bits), f"raw trajectory: {raw}"]
    if f["error"]:
        out.append(f"error: {f['error']}")
    if f["final_answer"]:
        out.append(f"final answer: {one_line(f['final_answer'], 200)}")
    if read_error:
        out.append(f"trajectory: {read_error}")
    if subs:
        out.append("sub-agent runs:")
        out.extend(subs)
    out += ["", "One line per step: `step-NNN steps.md:A-B source [turn] what happened`; the step is lines A-B of "
            "steps.md, and read_file reads it by its name (step-NNN.md). Markers: [= the earlier step it repeats], "
            "[cut N] characters cut, [base64×N] blobs dropped, [binary] binary output dropped.", ""]
    out.extend(lines)
    return "\n".join(out) + "\n"
