"""A loaded harness described as plain data, so that checks can reason about it without importing it.

The confined worker loads the harness (its code runs only there) and hands the host this
description: each tool's name, source and input schema, and whether its function can take
what the schema allows; the skills; the stop tools; each middleware class with the hooks it
overrides; the sub-agents, described the same way. The gate's smoke check builds its plan and
reads its outcome from this (evolve_agent/smoke.py).
"""

from __future__ import annotations

import inspect
from typing import Any

from ahe.runtime.middleware import HOOKS, overrides
from ahe.runtime.tools import INJECTABLE, Tool

MAX_DEPTH = 3


def signature_problems(tool: Tool) -> list[str]:
    """A tool whose function cannot take what its schema allows (checked without calling it)."""
    if tool.source.startswith("builtin:"):
        return []
    try:
        params = inspect.signature(tool.function).parameters
    except (TypeError, ValueError):
        return []
    schema = tool.description.input_schema
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    problems = []
    for name in props:
        p = params.get(name)
        if (p is None and not takes_any) or (p is not None and p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL)):
            problems.append(f"tool {tool.name} ({tool.source}): its schema offers argument {name!r} but the function does not accept it")
    for name, p in params.items():
        if name in INJECTABLE or p.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL):
            continue
        if p.default is inspect.Parameter.empty and name not in required:
            problems.append(f"tool {tool.name} ({tool.source}): parameter {name!r} has no default but the schema does not require it")
    return problems


def _middleware(agent: Any) -> list[dict[str, Any]]:
    out = []
    for cls, params in agent.middleware_classes:
        try:
            inst = cls(**params)
        except Exception:  # a middleware that cannot be made fails the session itself
            continue
        out.append({"name": cls.__name__, "hooks": sorted(h for h in HOOKS if overrides(inst, h))})
    return out


def describe_agent(agent: Any, depth: int = 0) -> dict[str, Any]:
    """The data the gate needs about a loaded agent (and its sub-agents, to MAX_DEPTH)."""
    subs: dict[str, Any] = {}
    if depth < MAX_DEPTH:
        for name in sorted(agent.sub_agents):
            try:
                subs[name] = describe_agent(agent.sub_agent(name), depth + 1)
            except Exception as exc:  # reported by the delegation in the smoke session itself
                subs[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return {
        "name": agent.config.name,
        "tools": [{"name": t.name, "source": t.source, "schema": t.description.input_schema,
                   "signature_problems": signature_problems(t)} for t in agent.tools.values()],
        "skills": sorted(agent.skills),
        "stop_tools": list(agent.config.stop_tools),
        "max_turns": agent.config.max_turns,
        "middleware": _middleware(agent),
        "sub_agents": subs,
    }
