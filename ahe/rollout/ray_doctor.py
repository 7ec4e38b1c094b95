"""`ahe doctor`'s Ray lines: is Ray installed, and, when a cluster is configured, its nodes."""

from __future__ import annotations

import os
from typing import Any


def ray_checks(address: str | None, check_cls: Any) -> list[Any]:
    """One check for the package; one more with the cluster's nodes when an address is given
    (--ray-address, or RAY_ADDRESS in the environment). Asked about a cluster, the doctor
    fails (non-zero exit) when it cannot reach it; otherwise Ray is optional."""
    address = address or os.environ.get("RAY_ADDRESS") or None
    version = installed_version()
    if version is None:
        return [check_cls("ray (executor ray)", False, "not installed", "pip install 'ahe[ray]'  (only for --executor ray)",
                          required=bool(address))]
    checks = [check_cls("ray (executor ray)", True, f"ray {version}", required=False)]
    if address:
        checks.append(_cluster(address, check_cls))
    return checks


def installed_version() -> str | None:
    """Ray's version, or None when it is not installed; without importing it (seconds on a busy
    machine), so a wrong cluster address is told at once."""
    import importlib.metadata
    import importlib.util

    try:
        if importlib.util.find_spec("ray") is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        return importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def _cluster(address: str, check_cls: Any) -> Any:
    from ahe.errors import AheError
    from ahe.rollout.ray_executor import connect

    try:
        ray = connect(address)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        joined = _joined(ray)
    except AheError as exc:
        return check_cls("ray cluster", False, str(exc), "ray start --head  (or fix --ray-address / RAY_ADDRESS)")
    lines = []
    for n in nodes:
        res = n.get("Resources") or {}
        extra = ", ".join(f"{k}={v:g}" for k, v in sorted(res.items()) if k not in ("CPU", "memory", "object_store_memory") and not k.startswith("node:"))
        lines.append(
            f"{n.get('NodeManagerAddress')} {n['NodeID'][:8]}: CPU={res.get('CPU', 0):g} memory={res.get('memory', 0) / 2**30:.1f}GiB"
            + (f" {extra}" if extra else "")
        )
    ok = bool(nodes)
    where = address if joined in (None, address) else f"{address} (joined {joined})"  # which cluster `auto` found
    detail = f"{where}: {len(nodes)} alive node(s)" + ("; " + "; ".join(lines) if lines else "")
    fix = "" if ok else "ray start --address <head>:6379 on each worker machine"
    return check_cls("ray cluster", ok, detail, fix)


def _joined(ray: Any) -> str | None:
    try:
        return ray.get_runtime_context().gcs_address
    except Exception:  # an older Ray without it: the detail just lacks the address
        return None
