"""The session's public step API (docs/hooks.md), and that replay foresight needs nothing else."""

from __future__ import annotations

import ast
from pathlib import Path

from ahe.runtime import Session, ToolCallRequest, TurnFlags, load_agent
from ahe.runtime.trace import EventLog
from tests.test_runtime_middleware import mw_ws

ROOT = Path(__file__).resolve().parent.parent


class _Events(EventLog):
    def __init__(self) -> None:
        super().__init__(None)
        self.items: list[tuple[str, dict]] = []

    def emit(self, type_: str, **data) -> None:
        self.items.append((type_, data))


def test_replay_uses_only_the_public_api_of_session() -> None:
    """Private members it touches are its own; nothing private is imported from the runtime."""
    for path in sorted((ROOT / "evolve_agent" / "replay").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ahe.runtime"):
                assert not [a.name for a in node.names if a.name.startswith("_")], f"{path.name} imports a private name"
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            if not any(isinstance(b, ast.Name) and b.id == "Session" for b in cls.bases):
                continue
            own = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            own |= {t.attr for n in ast.walk(cls) if isinstance(n, (ast.Assign, ast.AnnAssign))
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
            used = {n.attr for n in ast.walk(cls)
                    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"}
            private = sorted(a for a in used if a.startswith("_") and a not in own)
            assert not private, f"{path.name}:{cls.name} reaches into Session internals: {private}"


async def test_step_api_applies_hooks_as_run_does(make_workspace) -> None:
    mw = [
        {"binding": "middleware.mw:Rewriter", "params": {"replace": True, "rewrite_input": True}},
        {"binding": "middleware.mw:Recorder", "params": {"tag": "A"}},
        {"binding": "middleware.mw:Broken"},
    ]
    session = Session(load_agent(mw_ws(make_workspace, mw)), None, state={"log": []})
    session.events = _Events()
    assert [type(m).__name__ for m in session.load_middleware()] == ["Rewriter", "Recorder", "Broken"]
    session.messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "do it"}]

    flags = TurnFlags()
    await session.run_hooks("before_model", flags=flags)
    assert session.messages[1]["content"] == "REPLACED INSTRUCTION"
    assert session.state["log"] == ["A:before_model"]

    result = await session.execute_tool_call(ToolCallRequest("c1", "echo", {"text": "hi"}, '{"text": "hi"}', None), flags)
    assert session.state["ran"] == ["rewritten"] and result.content == "echo:rewritten" and not result.is_error
    assert session.state["log"][1:] == ["A:before_tool", "A:wrap_tool_in", "A:wrap_tool_out", "A:after_tool"]
    # Broken's before_model raised, its before_tool set a field it may not, its after_tool returned 42
    assert [(d["middleware"], d["hook"]) for k, d in session.events.items if k == "middleware_error"] == [
        ("Broken", "before_model"), ("Broken", "before_tool"), ("Broken", "after_tool")]

    unknown = await session.execute_tool_call(ToolCallRequest("c2", "nope", {}, "{}", None), flags)
    assert unknown.is_error and unknown.metadata["error_kind"] == "unknown_tool"

    seen: list[list[dict]] = []

    async def model(messages):
        seen.append(messages)
        return "reply"

    assert await session.wrap_calls("wrap_model_call", model)(list(session.messages)) == "reply"
    assert session.state["log"][-2:] == ["A:wrap_model_in", "A:wrap_model_out"] and len(seen) == 1
    assert not flags.stop and not flags.force_continue
