"""What every generator stage shares: the output folder, the model client, the sandboxed
session helper, the test runner, the event log and the resume/kill rules.

Resume rule: a unit of work is done when its output file exists; outputs are written
atomically, last, so a killed process leaves either no output (the unit runs again from
scratch) or a complete one (the unit is never redone).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any, Callable

import jinja2
from pydantic import BaseModel
from rich.markup import escape

from ahe.errors import AheError
from ahe.io import atomic_write_json
from ahe.llm.types import Usage

WORKSPACE = Path(__file__).with_name("workspace")
PROMPTS = Path(__file__).with_name("prompts")
KILL_ENV = "AHE_PLAYGROUND_KILL_AT"
STAGES = ("propose", "plan", "scaffold", "tests", "reference", "derive")
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(PROMPTS), undefined=jinja2.StrictUndefined,
                          keep_trailing_newline=True, trim_blocks=True)


def render(template: str, **variables: Any) -> str:
    return _ENV.get_template(template).render(**variables)


def maybe_kill(stage: str) -> None:
    """Fault injection for resume tests: AHE_PLAYGROUND_KILL_AT=<stage> SIGKILLs this process
    right after the first unit of that stage has written its output."""
    if os.environ.get(KILL_ENV) == stage:
        os.kill(os.getpid(), signal.SIGKILL)


class UnitUsage(BaseModel):
    """Tokens and cost of one unit's sessions (kept in its output, so resume keeps the totals)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    turns: int = 0
    sessions: int = 0

    @classmethod
    def of(cls, usage: Usage, turns: int) -> "UnitUsage":
        return cls(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                   cost_usd=usage.cost_usd, turns=turns, sessions=1)


@dataclasses.dataclass
class GenContext:
    out: Path
    agent: Any  # LoadedAgent of the generator workspace
    client: Any  # the generator role's model client
    runner: Any  # SandboxRunner for the checks
    say: Callable[[str], None]

    # -------------------------------------------------------------- files and resume
    def path(self, *parts: str) -> Path:
        return self.out.joinpath(*parts)

    def load(self, path: Path) -> dict | None:
        return json.loads(path.read_text()) if path.is_file() else None

    def finish_unit(self, stage: str, unit: str, path: Path, data: dict) -> None:
        """Write a unit's output (atomically, last), log it, then maybe kill (resume tests)."""
        atomic_write_json(path, data)
        self.event("done", stage=stage, unit=unit, status=data.get("status", "done"), usage=data.get("usage"))
        maybe_kill(stage)

    def event(self, kind: str, **data: Any) -> None:
        line = json.dumps({"time": round(time.time(), 3), "event": kind, **data}, default=str)
        with open(self.out / "events.jsonl", "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def reject(self, stage: str, unit: str, what: str, reason: str) -> dict:
        self.event("rejected", stage=stage, unit=unit, what=what, reason=reason)
        self.say(f"  [yellow]rejected[/yellow] {escape(f'{stage} {unit}: {what} — {reason}')}")
        return {"what": what, "reason": reason}

    # -------------------------------------------------------------- sessions
    async def session(self, stage: str, unit: str, instruction: str, *, files: dict[str, str] | None,
                      ) -> tuple[Any, dict[str, str]]:
        """One generator session. `files=None`: text only (no tools, no sandbox); else the files
        become the sandbox's /app and the session's files come back as {path: text}."""
        from ahe.runtime import Session
        from ahe.sandbox.local import LocalSandbox

        trace_dir = self.path("traces", stage, unit)
        shutil.rmtree(trace_dir, ignore_errors=True)
        agent, sandbox, work = self.agent, None, None
        if files is None:
            cfg = agent.config.model_copy(update={"tools": [], "stop_tools": []})
            agent = dataclasses.replace(agent, config=cfg, tools={})
        else:
            work = self.path(".work", f"{stage}-{unit}")
            shutil.rmtree(work, ignore_errors=True)
            for rel, text in files.items():
                (work / "app" / rel).parent.mkdir(parents=True, exist_ok=True)
                (work / "app" / rel).write_text(text, encoding="utf-8")
            (work / "app").mkdir(parents=True, exist_ok=True)
            sandbox = LocalSandbox(work / "app", root_dir=work / "root")
            await sandbox.start()
        try:
            session = Session(agent, self.client, sandbox=sandbox, trace_dir=trace_dir,
                              working_directory="/app", session_id=f"generate-{stage}-{unit}")
            result = await session.run(instruction)
        finally:
            if sandbox is not None:
                await sandbox.stop()
        if result.infra_error:
            raise AheError(f"the generator's model failed in stage {stage} ({unit}): {result.detail}; "
                           "nothing of this stage was kept — run the same command again to resume.")
        out: dict[str, str] = {}
        if work is not None:
            app = work / "app"
            for p in sorted(app.rglob("*.py")):
                if "__pycache__" not in p.parts:
                    out[str(p.relative_to(app))] = p.read_text(encoding="utf-8", errors="replace")
            shutil.rmtree(work, ignore_errors=True)
        return result, out
