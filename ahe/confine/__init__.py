"""Confinement of harness code (DESIGN.md §11.5): every code-agent session runs in a worker.

The worker is a jail per session (bwrap locally) that imports the workspace's code and runs
`ahe.runtime.Session` there; it sees the workspace read-only, a private size-limited scratch
and one unix socket. Behind that socket the host runs a **model gateway** (keys, retries,
budgets, accounting, the recorded conversation) and the sandbox's exec channel. AHE's own
process never imports the harness's tools or middleware.

    from ahe.confine import run_confined_session   # host side, see host.py
"""

from ahe.confine.gateway import GatewayBudget, ModelGateway
from ahe.confine.host import ConfineMode, ConfinedSessionSpec, run_confined_session

__all__ = ["ConfineMode", "ConfinedSessionSpec", "GatewayBudget", "ModelGateway", "run_confined_session"]
