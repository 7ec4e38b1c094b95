"""Smoke sessions: does every registered component of a harness actually work?

One session of the harness runs against a scripted MOCK model (a `MockLLMServer` started
in-process with a policy generated from the harness — a mock of the *code agent's* model, only
there to drive the components) in a throwaway local sandbox. The generated plan, one call per
turn: every tool with minimal schema-valid arguments, `load_skill` for every skill, `delegate`
to every sub-agent (whose own session calls each of its tools the same way), then the stop
tool (or a plain reply). A real session exercises every middleware hook on the way.

What fails the check (errors) and what is only reported (warnings) — see docs/evolve-agent.md:
errors are a session that cannot start (prompt does not render, middleware cannot be made), an
infrastructure failure or a hang (wall clock), a tool function whose signature does not accept
what its schema allows, a middleware that raised in every hook it defines that ran, a failed
delegation. Warnings are a tool that raised on valid input, a middleware that raised in some
hooks, a component the session never reached, an empty skill.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from jsonschema import Draft202012Validator

from ahe.runtime.describe import signature_problems  # noqa: F401 - part of this module's API
from ahe.tempdirs import make_temp_dir

MAX_DEPTH = 3
SMOKE_DONE = "MOCK smoke session: done"


@dataclass
class SmokeReport:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    exercised: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    stop_reason: str | None = None
    load_problem: str | None = None  # set when the workspace did not load in its worker (no session ran)


# ---------------------------------------------------------------------- arguments
_MISSING = object()


def minimal_value(schema: Any, depth: int = 0) -> Any:
    """A small value satisfying `schema`, or _MISSING when none is obvious."""
    if depth > 8 or not isinstance(schema, dict):
        return {} if schema is True or schema == {} else _MISSING
    for key in ("const",):
        if key in schema:
            return schema[key]
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    if isinstance(schema.get("examples"), list) and schema["examples"]:
        return schema["examples"][0]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            for option in schema[key]:
                v = minimal_value(option, depth + 1)
                if v is not _MISSING:
                    return v
            return _MISSING
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            if isinstance(part, dict):
                merged.update(part)
        return minimal_value(merged, depth + 1)
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), "null")
    if typ is None:
        typ = "object" if "properties" in schema else ("array" if "items" in schema else "string")
    if typ == "null":
        return None
    if typ == "boolean":
        return False
    if typ in ("integer", "number"):
        lo = schema.get("minimum")
        if lo is None and schema.get("exclusiveMinimum") is not None:
            lo = schema["exclusiveMinimum"] + 1
        hi = schema.get("maximum")
        v = lo if lo is not None else (min(0, hi) if hi is not None else 0)
        return int(v) if typ == "integer" else v
    if typ == "string":
        return "x" * int(schema.get("minLength", 0))
    if typ == "array":
        n = int(schema.get("minItems", 0))
        if n == 0:
            return []
        item = minimal_value(schema.get("items", {}), depth + 1)
        return _MISSING if item is _MISSING else [item] * n
    if typ == "object":
        out = {}
        props = schema.get("properties") or {}
        for name in schema.get("required") or []:
            v = minimal_value(props.get(name, {}), depth + 1)
            if v is _MISSING:
                return _MISSING
            out[name] = v
        return out
    return _MISSING


def minimal_arguments(schema: dict[str, Any]) -> dict[str, Any] | None:
    """Schema-valid minimal arguments for a tool, or None when none could be built."""
    value = minimal_value(schema)
    if not isinstance(value, dict):
        return None
    if any(True for _ in Draft202012Validator(schema).iter_errors(value)):
        return None
    return value


# ---------------------------------------------------------------------- the harness, as data
@dataclass
class _ToolView:
    name: str
    source: str
    description: Any  # .input_schema, as on a loaded Tool


@dataclass
class _ConfigView:
    stop_tools: list[str]
    max_turns: int


class AgentView:
    """What the plan and the analysis read of a harness, from the description its confined worker
    gave (ahe.runtime.describe): the harness's code is never imported in AHE's process."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.tools = {t["name"]: _ToolView(t["name"], t["source"], SimpleNamespace(input_schema=t.get("schema") or {}))
                      for t in data.get("tools") or []}
        self.skills = list(data.get("skills") or [])
        self.sub_agents = [n for n, d in (data.get("sub_agents") or {}).items() if "error" not in d]
        self.config = _ConfigView(list(data.get("stop_tools") or []), int(data.get("max_turns") or 1))
        self.middleware = [(m["name"], set(m.get("hooks") or [])) for m in data.get("middleware") or []]

    def sub_agent(self, name: str) -> "AgentView":
        return AgentView(self.data["sub_agents"][name])

    def signature_problems(self) -> list[str]:
        return [p for t in self.data.get("tools") or [] for p in t.get("signature_problems") or []]


# ---------------------------------------------------------------------- the plan
def _marker(token: str, path: str) -> str:
    return f"[smoke {token} {path}]"


def _calls(agent: Any, token: str, path: str, report: SmokeReport) -> tuple[list[tuple[str, dict]], tuple[str, dict] | None]:
    calls: list[tuple[str, dict]] = []
    stop = set(agent.config.stop_tools)
    for name, tool in agent.tools.items():
        if name in stop:
            continue
        if name == "load_skill" and tool.source == "builtin:load_skill":
            calls += [("load_skill", {"name": s}) for s in sorted(agent.skills)]
            continue
        if name == "delegate" and tool.source == "builtin:delegate":
            depth = path.count("/") + 1 if path != "main" else 0
            if depth + 1 <= MAX_DEPTH:
                for sub in sorted(agent.sub_agents):
                    sub_path = sub if path == "main" else f"{path}/{sub}"
                    calls.append(("delegate", {"agent": sub, "message": _marker(token, f"sub={sub_path}")}))
            continue
        args = minimal_arguments(tool.description.input_schema)
        if args is None:
            report.warnings.append(f"tool {name}: no schema-valid minimal arguments could be built; it was not exercised")
            continue
        calls.append((name, args))
    final = None
    for name in agent.config.stop_tools:
        tool = agent.tools.get(name)
        if tool is not None:
            args = minimal_arguments(tool.description.input_schema) or {}
            if "message" in (tool.description.input_schema.get("properties") or {}):
                args["message"] = SMOKE_DONE
            final = (name, args)
            break
    return calls, final


def smoke_policy(agent: Any, token: str, report: SmokeReport | None = None) -> dict[str, Any]:
    """The MOCK policy that drives one smoke session of `agent` (and of its sub-agents)."""
    report = report or SmokeReport()
    rules: list[dict[str, Any]] = []

    def add(a: Any, path: str, depth: int) -> None:
        marker = _marker(token, "main" if path == "main" else f"sub={path}")
        calls, final = _calls(a, token, path, report)
        for i, (name, args) in enumerate(calls, 1):
            rules.append({"name": f"{path} #{i} {name}", "match": {"first_user_contains": marker, "turn": i},
                          "tool_calls": [{"name": name, "arguments": json.dumps(args)}]})
        last: dict[str, Any] = {"name": f"{path} end", "match": {"first_user_contains": marker, "turn": len(calls) + 1}}
        if final is not None:
            last["tool_calls"] = [{"name": final[0], "arguments": json.dumps(final[1])}]
        else:
            last["reply"] = SMOKE_DONE
        rules.append(last)
        if depth < MAX_DEPTH:
            for sub in sorted(a.sub_agents):
                add(a.sub_agent(sub), sub if path == "main" else f"{path}/{sub}", depth + 1)

    add(agent, "main", 0)
    return {"name": "ahe-gate-smoke (MOCK)", "rules": rules, "default": {"reply": SMOKE_DONE}}


def _plan_length(agent: Any, token: str) -> int:
    calls, _ = _calls(agent, token, "main", SmokeReport())
    return len(calls) + 1


# ---------------------------------------------------------------------- the session
async def smoke_check(root: Path, *, url: str | None = None, timeout_sec: float = 60,
                      trace_dir: Path | None = None) -> SmokeReport:
    """Load the workspace at `root` in a worker and run one smoke session. The load is the check:
    a workspace that does not load sets `load_problem` (the caller runs `probe_problem` first)."""
    from ahe.errors import ConfigError
    from ahe.llm import make_client
    from ahe.llm.types import RoleConfig
    from ahe.confine.host import ConfinedSessionSpec, ConfinedWorker, describe_confined
    from ahe.sandbox.local import LocalSandbox
    from ahe.testing import MockLLMServer, Policy

    report = SmokeReport()
    try:
        problem, description = await describe_confined(root, "auto")  # loaded in a worker, never here
    except Exception as exc:  # the worker could not even start: say so, never pass the change
        problem, description = f"the harness could not be loaded in a confined worker: {type(exc).__name__}: {exc}", None
    if problem or description is None:
        report.load_problem = problem or "its worker described nothing"
        report.errors.append(f"the workspace does not load: {report.load_problem}")
        return report
    agent = AgentView(description)
    report.errors += agent.signature_problems()
    for sub in agent.sub_agents:
        for p in agent.sub_agent(sub).signature_problems():
            if p not in report.errors:
                report.errors.append(f"sub-agent {sub}: {p}")

    token = uuid.uuid4().hex[:10]
    server = None
    own_trace = trace_dir is None
    trace = make_temp_dir("smoke-trace") if own_trace else Path(trace_dir)
    app = make_temp_dir("smoke-app")
    sandbox = client = worker = None
    try:
        if url is None:
            server = MockLLMServer(Policy.from_dict(smoke_policy(agent, token, report)), log_requests=False)
            url = server.start()
        client = make_client("agent", RoleConfig(model="mock-smoke", base_url=url, max_attempts=2, timeout_sec=30,
                                                 backoff_initial_sec=0.01, backoff_max_sec=0.05), env={})
        turns = _plan_length(agent, token) + 3  # the worker raises each agent's max_turns to this (min_turns)
        # The session runs the harness's hooks and tools: in a confined worker, as every rollout does.
        worker = await ConfinedWorker.launch(root, "auto")
        sandbox = LocalSandbox(app, isolation="auto")
        await sandbox.start()
        instruction = (f"{_marker(token, 'main')} MOCK smoke session of the AHE validation gate: each tool, skill "
                       "and sub-agent is called once with minimal arguments.")
        spec = ConfinedSessionSpec(instruction=instruction, trace_dir=trace, wall_clock_sec=timeout_sec, min_turns=turns)
        try:
            result = await worker.run(spec, client, sandbox)
        except ConfigError as exc:
            report.errors.append(f"a session cannot start with this harness: {exc}")
            return report
        except Exception as exc:
            report.errors.append(f"the smoke session crashed: {type(exc).__name__}: {exc}")
            return report
        report.stop_reason = result.stop_reason.value
        _analyse(agent, result, trace, report)
    except Exception as exc:
        report.errors.append(f"the smoke session could not run ({type(exc).__name__}: {exc})")
    finally:
        if worker is not None:
            await worker.close()
        await close_smoke_parts(sandbox, client, server)
        shutil.rmtree(app, ignore_errors=True)
        if own_trace:
            shutil.rmtree(trace, ignore_errors=True)
    return report


async def close_smoke_parts(sandbox: Any, client: Any, server: Any) -> None:
    """Stop a smoke session's sandbox, model client and MOCK server; closing never fails the check."""
    if sandbox is not None:
        try:
            await sandbox.stop()
        except Exception:
            pass
    if client is not None:
        try:
            await client.aclose()
        except Exception:
            pass
    if server is not None:
        server.stop()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _events(trace: Path) -> list[dict[str, Any]]:
    out = []
    for p in sorted(trace.rglob("events.jsonl")):
        try:
            for line in p.read_text(encoding="utf-8").splitlines():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        except OSError:
            continue
    return out


def _tool_results(trace: Path) -> list[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    """(agent path, call arguments, tool, result) for every tool call in every trajectory."""
    out = []
    for p in sorted(trace.rglob("trajectory.json")):
        data = _read_json(p) or {}
        where = "main" if p.parent == trace else str(p.parent.relative_to(trace))
        for step in data.get("steps") or []:
            args_by_id = {tc.get("tool_call_id"): tc for tc in step.get("tool_calls") or []}
            for res in (step.get("observation") or {}).get("results") or []:
                tc = args_by_id.get(res.get("source_call_id")) or {}
                extra = res.get("extra") or {}
                out.append((where, tc.get("arguments") or {}, extra.get("tool") or tc.get("function_name") or "?", res))
    return out


def _middleware_classes(agent: AgentView, depth: int = 0) -> list[tuple[str, set[str]]]:
    out = list(agent.middleware)
    if depth < MAX_DEPTH:
        for sub in agent.sub_agents:
            out += _middleware_classes(agent.sub_agent(sub), depth + 1)
    return out


def _analyse(agent: Any, result: Any, trace: Path, report: SmokeReport) -> None:
    stop = result.stop_reason.value
    if stop == "infra_error":
        report.errors.append(f"the smoke session ended on an infrastructure error: {result.detail}")
    elif stop == "wall_clock":
        report.errors.append(f"the smoke session did not finish in time ({result.detail}): a tool or middleware hangs")
    elif stop == "context_budget":
        report.warnings.append(f"the smoke session hit the context budget: {result.detail}")
    elif stop == "middleware_stop":
        report.warnings.append(f"a middleware stopped the smoke session: {result.detail}")

    events = _events(trace)
    results = _tool_results(trace)
    for where, args, tool, res in results:
        extra = res.get("extra") or {}
        content = str(res.get("content") or "")
        prefix = "" if where == "main" else f"sub-agent {where}: "
        if tool == "load_skill":
            report.exercised["skills"].append(str(args.get("name")))
            if not extra.get("is_error") and not content.strip():
                report.warnings.append(f"{prefix}skill {args.get('name')} has an empty body")
        elif tool == "delegate":
            report.exercised["sub_agents"].append(str(args.get("agent")))
            if extra.get("is_error") and not extra.get("denied"):
                report.errors.append(f"{prefix}delegating to sub-agent {args.get('agent')} failed: {content[:300]}")
        else:
            report.exercised["tools"].append(tool if where == "main" else f"{where}:{tool}")
        if not extra.get("is_error") or tool == "delegate":
            continue
        kind = extra.get("error_kind")
        if extra.get("denied"):
            report.warnings.append(f"{prefix}tool {tool} was denied by a middleware in the smoke session: {content[:200]}")
        elif kind in ("exception", "call_error"):
            report.warnings.append(f"{prefix}tool {tool} failed on schema-valid input {json.dumps(args)[:200]}: {content[:300]}")
        elif kind == "invalid_arguments":
            report.warnings.append(f"{prefix}tool {tool} rejected the generated minimal arguments: {content[:200]}")
    called_tools = {t for _, _, t, _ in results}
    for name in agent.tools:
        if name not in called_tools and name not in agent.config.stop_tools:
            report.warnings.append(f"tool {name} was not exercised (the smoke session ended: {stop})")

    # Middleware: which hooks ran (from the session's shape) and which raised.
    model_calls = any(e.get("type") == "model_call" for e in events)
    tool_calls = [e for e in events if e.get("type") == "tool_call"]
    ran = {"before_session", "after_session"}
    if model_calls:
        ran |= {"before_model", "after_model", "wrap_model_call"}
    if tool_calls:
        ran |= {"before_tool", "after_tool"}
        denied = {r.get("source_call_id") for _, _, _, r in results if (r.get("extra") or {}).get("denied")}
        if any(e.get("id") not in denied for e in tool_calls):
            ran.add("wrap_tool_call")
    raised: dict[str, dict[str, str]] = defaultdict(dict)
    for e in events:
        if e.get("type") == "middleware_error":
            raised[str(e.get("middleware"))].setdefault(str(e.get("hook")), str(e.get("error")))
    seen = set()
    for name, hooks in _middleware_classes(agent):
        if name in seen:
            continue
        seen.add(name)
        report.exercised["middleware"].append(name)
        active = hooks & ran
        errs = raised.get(name, {})
        if not errs:
            continue
        detail = "; ".join(f"{h}: {m}" for h, m in sorted(errs.items()))
        if active and active <= set(errs):
            report.errors.append(f"middleware {name} raised in every hook it defines that ran ({', '.join(sorted(active))}): {detail}")
        else:
            report.warnings.append(f"middleware {name} raised in hook(s) {', '.join(sorted(errs))}: {detail}")
