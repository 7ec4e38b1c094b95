"""Parsers of the generator's tagged output: project proposals and task plans.

The model answers in simple tags (`<project>…</project>`, `<task name="…">…</task>`), which
survive the small format slips models make better than JSON does. Whatever does not validate
is returned as a rejection with its reason, never silently dropped.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field, ValidationError, field_validator

_IDENT = re.compile(r"^[a-z][a-z0-9_]*$")
_TASK_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
CASES = ("happy", "edge", "error")


def _blocks(tag: str, text: str) -> list[tuple[str, str]]:
    """(attributes, body) of every <tag …>…</tag> in `text`."""
    return re.findall(rf"<{tag}\b([^>]*)>(.*?)</{tag}\s*>", text, flags=re.S)


def _field(tag: str, body: str) -> str | None:
    m = re.search(rf"<{tag}\s*>(.*?)</{tag}\s*>", body, flags=re.S)
    return m.group(1).strip() if m else None


def _attr(name: str, attrs: str) -> str | None:
    m = re.search(rf'\b{name}\s*=\s*"([^"]*)"', attrs)
    return m.group(1).strip() if m else None


def _msg(err: dict) -> str:
    """pydantic's message without its "Value error, " prefix."""
    return str(err["msg"]).removeprefix("Value error, ")


class ProjectProposal(BaseModel):
    name: str
    package: str
    description: str = Field(min_length=10)
    language: str = "python"
    libraries: str = "standard library only"

    @field_validator("name", "package")
    @classmethod
    def _ident(cls, v: str) -> str:
        if not _IDENT.match(v):
            raise ValueError(f"{v!r} must be lower-case letters, digits and underscores")
        return v

    @field_validator("language")
    @classmethod
    def _python(cls, v: str) -> str:
        if v.strip().lower() not in ("python", "python3", "python 3"):
            raise ValueError(f"language {v!r} is not Python, the only language supported")
        return "python"

    @field_validator("libraries")
    @classmethod
    def _stdlib(cls, v: str) -> str:
        low = v.lower()
        if not ("standard library" in low or "stdlib" in low or low.strip() in ("", "none")):
            raise ValueError(f"libraries {v!r}: only the standard library is allowed")
        return v


class Rejection(BaseModel):
    what: str
    reason: str


def parse_proposals(text: str) -> tuple[list[ProjectProposal], list[Rejection]]:
    found, rejected = [], []
    for n, (_, body) in enumerate(_blocks("project", text)):
        data = {k: _field(k, body) for k in ("name", "package", "description", "language", "libraries")}
        data = {k: v for k, v in data.items() if v is not None}
        try:
            found.append(ProjectProposal.model_validate(data))
        except ValidationError as exc:
            err = exc.errors()[0]
            rejected.append(Rejection(what=f"project #{n + 1} ({data.get('name', '?')})",
                                      reason=f"{'.'.join(map(str, err['loc'])) or 'project'}: {_msg(err)}"))
    return found, rejected


class ChecklistItem(BaseModel):
    name: str
    case: str
    purpose: str
    assertion: str

    @field_validator("name")
    @classmethod
    def _test_name(cls, v: str) -> str:
        if not re.match(r"^test_[a-z0-9_]+$", v):
            raise ValueError(f"test name {v!r} must look like test_something")
        return v

    @field_validator("case")
    @classmethod
    def _case(cls, v: str) -> str:
        if v not in CASES:
            raise ValueError(f"case {v!r} must be one of {', '.join(CASES)}")
        return v


class PlannedTask(BaseModel):
    name: str
    phase: str
    module: str  # pkg/mod.py
    title: str
    description: str
    functions: list[str] = Field(min_length=1)
    checklist: list[ChecklistItem] = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _TASK_NAME.match(v):
            raise ValueError(f"task name {v!r} must be lower-case letters, digits, '-' or '_'")
        return v

    def qualified(self) -> list[str]:
        return [f"{self.module}:{f}" for f in self.functions]


class Plan(BaseModel):
    tasks: list[PlannedTask] = Field(default_factory=list)
    rejected: list[Rejection] = Field(default_factory=list)


def parse_plan(text: str, package: str) -> Plan:
    """Phases → modules → tasks with checklists; duplicates and malformed pieces are rejected."""
    plan = Plan()
    names: set[str] = set()
    tests: set[str] = set()
    for phase_attrs, phase_body in _blocks("phase", text) or [('name="main"', text)]:
        phase = _attr("name", phase_attrs) or "main"
        for mod_attrs, mod_body in _blocks("module", phase_body):
            module = _attr("path", mod_attrs) or ""
            if not re.match(rf"^{re.escape(package)}/[a-z0-9_/]+\.py$", module):
                plan.rejected.append(Rejection(what=f"module {module!r}", reason=f"path must be a .py file inside {package}/"))
                continue
            for task_attrs, body in _blocks("task", mod_body):
                task = _task(phase, module, task_attrs, body, plan, tests)
                if task is None:
                    continue
                if task.name in names:
                    plan.rejected.append(Rejection(what=f"task {task.name}", reason="duplicate task name"))
                    continue
                names.add(task.name)
                plan.tasks.append(task)
    return plan


def _task(phase: str, module: str, attrs: str, body: str, plan: Plan, tests: set[str]) -> PlannedTask | None:
    name = _attr("name", attrs) or "?"
    items = []
    for t_attrs, t_body in _blocks("test", body):
        raw = {"name": _attr("name", t_attrs) or "", "case": _attr("case", t_attrs) or "",
               "purpose": _field("purpose", t_body) or "", "assertion": _field("assertion", t_body) or ""}
        try:
            item = ChecklistItem.model_validate(raw)
        except ValidationError as exc:
            plan.rejected.append(Rejection(what=f"task {name}, test {raw['name'] or '?'}", reason=_msg(exc.errors()[0])))
            continue
        if item.name in tests:
            plan.rejected.append(Rejection(what=f"task {name}, test {item.name}", reason="duplicate test name"))
            continue
        tests.add(item.name)
        items.append(item)
    funcs = [f.strip() for f in (_field("functions", body) or "").split(",") if f.strip()]
    data = {"name": name, "phase": phase, "module": module, "title": _field("title", body) or "",
            "description": _field("description", body) or "", "functions": funcs, "checklist": items}
    try:
        return PlannedTask.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        plan.rejected.append(Rejection(what=f"task {name}", reason=f"{'.'.join(map(str, err['loc']))}: {_msg(err)}"))
        return None
