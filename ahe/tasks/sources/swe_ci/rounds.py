"""The CI loop's records: [ci] settings, one line per finished round, the prompts, the trace.

A round is finished once its line is in `verifier/rounds.jsonl` (written atomically, after
the round's /app snapshot). Everything about a round that is not in that file is redone.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from ahe.errors import ConfigError
from ahe.llm.types import Usage
from ahe.io import atomic_write_json, atomic_write_text
from ahe.runtime.trace import TrajectoryWriter
from ahe.tasks.sources.swe_ci import metrics
from ahe.tasks.sources.swe_ci.layout import CISettings

ROUNDS_FILE = "rounds.jsonl"
SUMMARY_TESTS = 40  # failing tests listed in full in one round's summary


def ci_settings(task_dir: Path) -> CISettings | None:
    """[ci] of the task's task.toml, or None for a one-shot task. Bad values name the field."""
    path = task_dir / "task.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None  # the loader reports a broken task.toml with its own message
    table = data.get("ci")
    if table is None:
        return None
    try:
        return CISettings.model_validate(table)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(x) for x in first["loc"]) or "[ci]"
        raise ConfigError(f"{path}: [ci] {field} {first['msg'].lower()}; write rounds = N (N >= 1) and gamma >= 1.") from None


class RoundRecord(BaseModel):
    """One line of verifier/rounds.jsonl."""

    round: int
    a: float = Field(description="a(c_i), the normalized change of the round's codebase")
    n_pass: int
    failing: int = Field(description="target tests not passing after the round")
    regressions: list[str] = Field(default_factory=list)
    requirements: str = ""
    architect_stop: str | None = None
    programmer_stop: str | None = None
    programmer_answer: str | None = None
    usage: Usage = Field(default_factory=Usage, description="the Architect's and the Programmer's tokens")
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    duration_sec: float = 0.0
    finished_at: str | None = None


def read_rounds(verifier_dir: Path) -> list[RoundRecord]:
    path = verifier_dir / ROUNDS_FILE
    if not path.is_file():
        return []
    return [RoundRecord.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def append_round(verifier_dir: Path, record: RoundRecord) -> None:
    """Add a finished round; the whole file is rewritten atomically, so a kill leaves it whole."""
    lines = [r.model_dump_json() for r in read_rounds(verifier_dir)] + [record.model_dump_json()]
    atomic_write_text(verifier_dir / ROUNDS_FILE, "\n".join(lines) + "\n")


def final_rewards(records: list[RoundRecord], ci: CISettings, expected: dict) -> dict[str, float]:
    """reward.json of a CI trial: a(c_N), EvoScore at gamma and at 1, zero-regression, counts."""
    changes = [r.a for r in records]
    last = records[-1] if records else None
    a_last = changes[-1] if changes else 0.0
    return {
        "reward": a_last,
        "normalized_change": a_last,
        "evoscore": metrics.evoscore(changes, ci.gamma, ci.rounds),
        "evoscore_gamma_1": metrics.evoscore(changes, 1.0, ci.rounds),
        "zero_regression": metrics.zero_regression(r.regressions for r in records),
        "solved": metrics.solved(changes),
        "rounds": float(len(records)),
        "n_pass": float(last.n_pass if last else expected["n_base"]),
        "n_base": float(expected["n_base"]),
        "n_target": float(expected["n_target"]),
        "gamma": ci.gamma,
    }


def failing_summary(statuses: dict, expected: dict) -> tuple[str, int]:
    """The non-passing summary the Architect reads: target tests that do not pass, with why."""
    tests, messages = statuses.get("tests", {}), statuses.get("messages", {})
    failing = [t for t in expected["target_tests"] if tests.get(t) != "passed"]
    n = len(expected["target_tests"]) - len(failing)
    lines = [f"CI report: {n} of {len(expected['target_tests'])} target tests pass; {len(failing)} do not.", ""]
    for t in failing[:SUMMARY_TESTS]:
        status = tests.get(t, "not collected")
        why = (messages.get(t) or "").strip().splitlines()
        lines.append(f"- {t}: {status}" + (f" — {why[-1][:200]}" if why else ""))
    if len(failing) > SUMMARY_TESTS:
        lines.append(f"- … and {len(failing) - SUMMARY_TESTS} more")
    return "\n".join(lines) + "\n", len(failing)


ARCHITECT_MESSAGE = """CI round {round} of {rounds}. The repository is in /app.

{summary}
Write this round's requirements (at most 5) for the Programmer."""

PROGRAMMER_MESSAGE = """CI round {round} of {rounds} of maintaining the repository in /app.

{instruction}
The Architect reviewed the latest CI report and asks for this round:

{requirements}

Implement these requirements in /app. Keep everything that works now working."""


def write_trajectory(path: Path, records: list[RoundRecord], session_id: str) -> None:
    """The trial's own trajectory.json: one step per round phase, pointing at the sessions.

    The sessions themselves are in sub_agents/rNN-architect and rNN-programmer, where the
    debugger's corpus finds them as sub-agent traces of this trial.
    """
    traj = TrajectoryWriter(None, session_id=session_id, agent={"name": "swe-ci-loop", "version": "ahe"})
    for r in records:
        for role, text in (("architect", r.requirements), ("programmer", r.programmer_answer or "")):
            ref = {"session_id": f"{session_id}.r{r.round:02d}-{role}",
                   "trajectory_path": f"sub_agents/r{r.round:02d}-{role}/trajectory.json"}
            traj.add_step({"source": "agent", "message": f"round {r.round}: {role}\n\n{text}".strip(),
                           "observation": {"results": [{"content": text, "subagent_trajectory_ref": [ref]}]}})
        traj.add_step({"source": "system", "message": f"round {r.round}: a = {r.a:.4f}, {r.n_pass} target tests pass, "
                       f"{len(r.regressions)} regression(s)" + (f": {', '.join(r.regressions[:10])}" if r.regressions else "")})
    atomic_write_json(path, {**traj.header, "steps": traj.steps, "final_metrics": {"total_steps": len(traj.steps)},
                             "extra": {"complete": True, "rounds": len(records)}})
