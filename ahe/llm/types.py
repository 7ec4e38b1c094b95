"""Types of the model layer: what a call returns and how a role is configured.

Messages are plain OpenAI chat-completions dicts everywhere in AHE ({"role": ..., ...}),
so traces, the mock server and any OpenAI-compatible endpoint speak the same language.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Protocol, get_args

from pydantic import BaseModel, ConfigDict, Field

# Who makes a model call (DESIGN §4, docs/models.md). `agent` is the code agent and its
# sub-agents; `explore` defaults to the evolve role's settings; `generator` is the
# SWE-Playground task generator (`ahe tasks generate`); `reeval` is accounting only (the
# re-evaluation trials of attribution and H_best, which run the agent's endpoint).
Role = Literal["agent", "debugger", "evolve", "explore", "generator", "reeval"]
ROLES: tuple[str, ...] = get_args(Role)  # display and validation order


class LLMSettings(BaseModel):
    """Sampling settings; the `llm:` block of agent.yaml (protected from the evolve agent)."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = 0.7
    max_tokens: int | None = 16000
    reasoning_effort: str | None = None
    top_p: float | None = None


class Price(BaseModel):
    """USD per million tokens for one model."""

    model_config = ConfigDict(extra="forbid")

    input: float = 0.0
    output: float = 0.0
    cached_input: float | None = None


class RoleConfig(BaseModel):
    """Where one role's calls go. Unset fields fall back to OPENAI_BASE_URL / OPENAI_API_KEY / AHE_MODEL."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    timeout_sec: float = 600.0
    max_attempts: int = 6
    backoff_initial_sec: float = 1.0
    backoff_max_sec: float = 60.0
    prices: dict[str, Price] = Field(default_factory=dict)
    # sent with every request of this role, over the harness's llm block (e.g. reasoning_effort
    # per model in `ahe transfer`'s models file); unknown keys go into the body as they are
    params: dict[str, Any] = Field(default_factory=dict)


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: "Usage") -> "Usage":
        cost = None
        if self.cost_usd is not None or other.cost_usd is not None:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost_usd=cost,
        )


class ToolCall(BaseModel):
    """One tool call the model asked for.

    `arguments` is the parsed JSON object (possibly after an unambiguous repair, then
    `repaired` is True). When the arguments cannot be parsed, `arguments` is None and
    `parse_error` says why; the runtime returns that to the model as an error result.
    """

    id: str
    name: str
    raw_arguments: str = ""
    arguments: dict[str, Any] | None = None
    parse_error: str | None = None
    repaired: bool = False


class ModelResponse(BaseModel):
    content: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)
    latency_sec: float = 0.0
    attempts: int = 1

    def assistant_message(self) -> dict[str, Any]:
        """The OpenAI message to append to the conversation for this response."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            msg["tool_calls"] = [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": tc.raw_arguments},
                }
                for tc in self.tool_calls
            ]
        return msg


class ModelClient(Protocol):
    """Anything that answers a chat-completions request. The runtime depends only on this."""

    role: str
    model: str

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        settings: LLMSettings | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> ModelResponse:
        """One chat completion, retried on transient errors.

        `on_event(kind, data)` is told about retries ("llm_retry") and repairs
        ("tool_args_repaired") so the runtime can record them in events.jsonl. Raises
        `ahe.errors.InfrastructureError` when the endpoint stays unusable, and
        `ContextLengthError` (a subclass) when the request is too long for the model.
        """
        ...
