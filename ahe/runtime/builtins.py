"""Tools the runtime adds by itself: `load_skill`, `delegate` and a default `finish`.

`load_skill` exists when the workspace has skills; its description lists each skill's name
and one line, and calling it returns the body (progressive disclosure). `delegate` exists
when there are sub-agents and runs one in a fresh context on the same sandbox. `finish` is
added when `stop_tools` names it and the workspace does not define it.
"""

from __future__ import annotations

from typing import Any, Protocol

from ahe.runtime.tools import Tool, ToolDescription, ToolResult
from ahe.runtime.view import SessionView


class AgentParts(Protocol):
    """What these tools read of a loaded workspace (`ahe.runtime.workspace.LoadedAgent` is one):
    a protocol here, so the loader imports this module and never the other way round."""

    skills: dict[str, Any]  # name -> Skill (name, description, body)
    sub_agents: dict[str, Any]  # name -> SubAgentEntry
    tools: dict[str, Tool]
    config: Any  # AgentConfig

    def sub_agent(self, name: str) -> "AgentParts": ...


def _skill_tool(agent: "AgentParts") -> Tool:
    lines = [f"- {s.name}: {s.description.splitlines()[0]}" for s in agent.skills.values()]
    desc = ToolDescription(
        name="load_skill",
        description="Load the full instructions of a skill by name. Available skills:\n" + "\n".join(lines),
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string", "enum": sorted(agent.skills)}},
            "required": ["name"],
            "additionalProperties": False,
        },
    )

    def load_skill(name: str) -> ToolResult:
        skill = agent.skills.get(name)
        if skill is None:
            return ToolResult(content=f"no skill named {name!r}; available: {', '.join(sorted(agent.skills))}", is_error=True)
        return ToolResult(content=skill.body)

    return Tool(description=desc, function=load_skill, source="builtin:load_skill")


def _delegate_tool(agent: "AgentParts") -> Tool:
    lines = []
    for name, entry in agent.sub_agents.items():
        sub = agent.sub_agent(name)
        summary = entry.description or sub.config.description or ""
        lines.append(f"- {name}: {summary}".rstrip(": "))
    desc = ToolDescription(
        name="delegate",
        description=(
            "Hand a self-contained job to a sub-agent. It starts with a fresh context (it sees only "
            "your message), works in the same environment, and returns its final answer. Sub-agents:\n"
            + "\n".join(lines)
        ),
        input_schema={
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": sorted(agent.sub_agents)},
                "message": {"type": "string", "description": "everything the sub-agent needs to know"},
            },
            "required": ["agent", "message"],
            "additionalProperties": False,
        },
    )

    async def delegate(agent_name: str = "", message: str = "", session: "SessionView | None" = None, **kw: Any) -> ToolResult:
        return await session.run_sub_agent(kw.get("agent", agent_name), message)  # type: ignore[union-attr]

    return Tool(description=desc, function=delegate, source="builtin:delegate")


def _finish_tool() -> Tool:
    desc = ToolDescription(
        name="finish",
        description="Call when the task is complete. The message is your final answer.",
        input_schema={
            "type": "object",
            "properties": {"message": {"type": "string", "description": "final answer or summary"}},
            "additionalProperties": False,
        },
    )

    def finish(message: str = "") -> str:
        return message

    return Tool(description=desc, function=finish, source="builtin:finish")


def add_builtin_tools(agent: "AgentParts") -> None:
    if agent.skills and "load_skill" not in agent.tools:
        agent.tools["load_skill"] = _skill_tool(agent)
    if agent.sub_agents and "delegate" not in agent.tools:
        agent.tools["delegate"] = _delegate_tool(agent)
    if "finish" in agent.config.stop_tools and "finish" not in agent.tools:
        agent.tools["finish"] = _finish_tool()
