"""The gate's smoke check for a harness run by a third-party agent backend (docs/backends.md).

AHE's own harnesses get a planned session that calls every tool, skill and sub-agent
(evolve_agent/smoke.py). A mini-swe-agent config or a CLI agent's files have no such registry,
so the backend gives a scripted MOCK policy that drives one short session to its end, and the
session runs exactly as a rollout's would: through the backend, confined, behind the gateway,
in a throwaway local sandbox. It fails when the session cannot start or ends in an
infrastructure error or at the wall clock.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ahe.tempdirs import make_temp_dir
from evolve_agent.smoke import SmokeReport, close_smoke_parts


async def backend_smoke_check(backend, root: Path, *, timeout_sec: float = 60,
                              trace_dir: Path | None = None) -> SmokeReport:
    from ahe.agents import AgentRequest
    from ahe.errors import ConfigError
    from ahe.llm import make_client
    from ahe.llm.types import RoleConfig
    from ahe.runtime import StopReason
    from ahe.sandbox.local import LocalSandbox
    from ahe.testing import MockLLMServer, Policy

    report = SmokeReport()
    own_trace = trace_dir is None
    trace = make_temp_dir("smoke-trace") if own_trace else Path(trace_dir)
    trace.mkdir(parents=True, exist_ok=True)
    app = make_temp_dir("smoke-app")
    server = MockLLMServer(Policy.from_dict(backend.smoke_policy(root)), log_requests=False)
    sandbox = client = None
    try:
        url = server.start()
        client = make_client("agent", RoleConfig(model="mock-smoke", base_url=url, max_attempts=2, timeout_sec=30,
                                                 backoff_initial_sec=0.01, backoff_max_sec=0.05), env={})
        sandbox = LocalSandbox(app, isolation="auto")
        await sandbox.start()
        result = await backend.run(AgentRequest(
            harness=root, instruction="MOCK smoke session of the AHE validation gate: finish at once.",
            trace_dir=trace, client=client, sandbox=sandbox, wall_clock_sec=timeout_sec))
        report.stop_reason = result.stop_reason.value
        if result.stop_reason in (StopReason.infra_error, StopReason.wall_clock):
            report.errors.append(f"the {backend.name} session did not run to its end "
                                 f"({result.stop_reason.value}): {result.detail or 'no detail'}")
        elif result.stop_reason == StopReason.middleware_stop:  # the harness's own code ended a session told to finish
            report.errors.append(f"the harness's own code stopped the {backend.name} smoke session: "
                                 f"{result.detail or 'no detail'}")
    except ConfigError as exc:
        report.errors.append(f"a session cannot start with this harness: {exc}")
    except Exception as exc:
        report.errors.append(f"the smoke session could not run ({type(exc).__name__}: {exc})")
    finally:
        await close_smoke_parts(sandbox, client, server)
        await backend.aclose()
        shutil.rmtree(app, ignore_errors=True)
        if own_trace:
            shutil.rmtree(trace, ignore_errors=True)
    return report
