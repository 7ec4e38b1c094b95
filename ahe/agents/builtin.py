"""The backends AHE ships, registered on first use of the registry (imported lazily: a backend's
own package is imported only when one of its sessions runs)."""

from ahe.agents.ahe_backend import AheBackend
from ahe.agents.registry import register_agent_backend

register_agent_backend("ahe", AheBackend, AheBackend.summary)
