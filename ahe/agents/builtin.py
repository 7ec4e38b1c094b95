"""The backends AHE ships, registered on first use of the registry (imported lazily: a backend's
own package is imported only when one of its sessions runs)."""

from ahe.agents.ahe_backend import AheBackend
from ahe.agents.command_backend import CommandBackend
from ahe.agents.registrations import register_agent_backend

register_agent_backend("ahe", AheBackend, AheBackend.summary)
register_agent_backend("command", CommandBackend, CommandBackend.summary)


def _mini():
    from ahe.agents.mini_backend import MiniBackend  # mini-swe-agent itself is imported only in the jail

    return MiniBackend()


register_agent_backend("mini-swe-agent", _mini, "mini-swe-agent's agent loop on its own config YAML "
                       "(templates, limits, environment settings); the `mini` extra")
