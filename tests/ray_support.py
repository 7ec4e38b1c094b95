"""A real local Ray cluster for the Ray executor's tests (separate `ray start` processes).

Skipped, with the reason, when Ray is not installed — or failed instead when
AHE_REQUIRE_RAY=1 (CI sets it, so a broken install cannot hide behind a skip).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REQUIRED = os.environ.get("AHE_REQUIRE_RAY") == "1"


def ray_missing() -> str | None:
    try:
        import ray  # noqa: F401
    except ImportError:
        return "ray is not installed (pip install -e '.[ray]')"
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed"
    return None


def require_ray() -> None:
    why = ray_missing()
    if why is None:
        return
    if REQUIRED:
        pytest.fail(f"AHE_REQUIRE_RAY=1 but {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def ray_cluster():
    """A head (2 CPUs) and one worker node (2 CPUs, declaring the `docker` resource: docker trials
    go there only), each its own process group; stopped at the end."""
    require_ray()
    from ahe.testing.ray_cluster import LocalRayCluster

    cluster = LocalRayCluster()
    try:
        cluster.start(cpus=2)
        cluster.add_node("w1", cpus=2, resources={"docker": 1})
        yield cluster
    finally:
        import ray

        if ray.is_initialized():
            ray.shutdown()
        cluster.stop()


def ray_demo(directory: Path, address: str, **demo) -> Path:
    """The demo's experiment (one iteration; `write_demo` keywords in `demo`) under `executor: ray` on the
    cluster at `address`, two trials at a time, the scripted agent answering after 0.5 s so that trials
    are still running when a test looks (or kills). Returns the config path."""
    import yaml

    from ahe.demo import write_demo

    config = write_demo(directory, iterations=1, **demo)
    data = yaml.safe_load(config.read_text())
    data.update(executor="ray", ray_address=address, concurrency=2)
    config.write_text(yaml.safe_dump(data))
    pol = directory / "policies" / "agent.yaml"
    pol.write_text(yaml.safe_dump({**yaml.safe_load(pol.read_text()), "latency_sec": 0.5}))
    return config
