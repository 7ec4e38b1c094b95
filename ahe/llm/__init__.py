"""Model access over any OpenAI-compatible endpoint (DESIGN.md §4).

`OpenAIModelClient` is imported lazily: the openai SDK takes about a second to import, and
most importers of `ahe.llm` only want the types.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping

from ahe.llm.roles import ResolvedEndpoint, resolve_role
from ahe.errors import ConfigError
from ahe.llm.types import ROLES, LLMSettings, ModelClient, ModelResponse, Price, Role, RoleConfig, ToolCall, Usage
from ahe.llm.usage import UsageLedger

if TYPE_CHECKING:
    from ahe.llm.client import OpenAIModelClient


def make_client(role: Role, cfg: RoleConfig | None = None, ledger: UsageLedger | None = None,
                env: Mapping[str, str] = os.environ) -> "OpenAIModelClient":
    """A ready client for `role`: endpoint from the environment and `cfg` (ConfigError when incomplete)."""
    from ahe.llm.client import OpenAIModelClient

    if role not in ROLES:
        raise ConfigError(f"unknown model role {role!r}; the roles are {', '.join(ROLES)} (docs/models.md)")
    cfg = cfg or RoleConfig()
    return OpenAIModelClient(role, resolve_role(role, cfg, env), cfg, ledger)


def __getattr__(name: str) -> Any:
    if name == "OpenAIModelClient":
        from ahe.llm.client import OpenAIModelClient

        return OpenAIModelClient
    raise AttributeError(f"module 'ahe.llm' has no attribute {name!r}")


__all__ = [
    "LLMSettings", "ModelClient", "ModelResponse", "OpenAIModelClient", "Price", "ROLES", "ResolvedEndpoint", "Role",
    "RoleConfig", "ToolCall", "Usage", "UsageLedger", "make_client", "resolve_role",
]
