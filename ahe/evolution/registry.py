"""The verdict policies by name (`attribution.strictness`) and the search strategies by name (`search`):
the built-in ones and any a plugin registers.

Policies are leaves the loop calls; this module registers them from outside, so no policy
imports the registry, the attribution or the loop (tests/test_architecture.py forbids the
cycle). Plugins (modules named by AHE_PLUGINS, or `ahe.plugins` entry points) are loaded before
a name is looked up, so `strictness: my-policy` and `ahe simulate` find a plugin's policy.
"""

from __future__ import annotations

from ahe.errors import AheError
from ahe.evolution.policies import KEEP_EVERYTHING, LENIENT, PAPER, STRICT, VerdictPolicy
from ahe.evolution.search import BEST_OF_N, LINE, SearchStrategy

_POLICIES: dict[str, VerdictPolicy] = {}
from ahe.evolution.tree.search import TREE  # noqa: E402

_SEARCHES: dict[str, SearchStrategy] = {LINE.name: LINE, BEST_OF_N.name: BEST_OF_N, TREE.name: TREE}
_ALIASES = {"balanced": "paper"}  # the paper's rule under its name before policies existed
_builtins_loaded = False


def register_policy(policy: VerdictPolicy) -> VerdictPolicy:
    _POLICIES[policy.name] = policy
    return policy


def register_search(strategy: SearchStrategy) -> SearchStrategy:
    _SEARCHES[strategy.name] = strategy
    return strategy


def _load() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    from ahe.evolution.expected_value import ExpectedValuePolicy
    from ahe.evolution.noise import NoisePolicy

    for policy in (PAPER, LENIENT, STRICT, KEEP_EVERYTHING, NoisePolicy(), ExpectedValuePolicy()):
        _POLICIES.setdefault(policy.name, policy)
    from ahe.sandbox.registry import backend_names

    backend_names()  # loads the plugins (AHE_PLUGINS, ahe.plugins entry points): one may register policies too


def policy_names() -> list[str]:
    _load()
    return sorted(_POLICIES) + sorted(_ALIASES)


def get_policy(name: str) -> VerdictPolicy:
    """The policy called `name` (or its old alias), or one sentence naming the valid ones."""
    _load()
    policy = _POLICIES.get(_ALIASES.get(name, name))
    if policy is None:
        raise AheError(f"attribution.strictness {name!r}: no such verdict policy; use one of: {', '.join(policy_names())}")
    return policy


def search_names() -> list[str]:
    _load()
    return sorted(_SEARCHES)


def get_search(name: str) -> SearchStrategy:
    """The search strategy called `name`, or one sentence naming the valid ones."""
    _load()
    strategy = _SEARCHES.get(name)
    if strategy is None:
        raise AheError(f"search {name!r}: no such search strategy; use one of: {', '.join(search_names())}")
    return strategy
