"""Runs a PEER harness against the scripted mock server; executed by the peers' own Python.

    <peer-venv>/bin/python bench/peers/peer_runner.py overhead --peer mini --env noop --url URL --calls 100
    <peer-venv>/bin/python bench/peers/peer_runner.py concurrency --peer mini --env noop --url URL --calls 20 --sessions 64

It never imports AHE: the peers live in their own virtual environment (bench/setup_peers.sh)
so their pinned dependencies cannot disturb AHE's. It prints one JSON object on stdout.

Peers:
  mini           mini-swe-agent's DefaultAgent + LitellmModel (tool calling, its default since v2),
                 with its `mini.yaml` prompts and a trajectory file saved after every step
                 (as `mini` and its batch runner do). Environments: `noop` (in-process, returns
                 at once), `local` (LocalEnvironment: a subprocess per command, no isolation),
                 `bwrap` (its BubblewrapEnvironment: a new bwrap jail per command).
  openai-agents  the OpenAI Agents SDK: Agent + Runner with OpenAIChatCompletionsModel and an
                 async function tool `noop` (tracing disabled: it would upload otherwise).
  smolagents     Hugging Face smolagents: ToolCallingAgent + OpenAIServerModel and a `noop` tool.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of litellm's price list
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_COST_TRACKING", "ignore_errors")
os.environ.setdefault("OPENAI_API_KEY", "not-needed")

def _protocol_channel():
    """stdout for this script's JSON lines only: what the libraries print (litellm prints
    "Provider List: ..." to stdout on every cost lookup of a model it has no price for) goes
    to stderr, so the benchmark reading our first line gets the ready line, not that."""
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    return channel


PROTOCOL = _protocol_channel()


def emit(obj: dict) -> None:
    PROTOCOL.write(json.dumps(obj) + "\n")
    PROTOCOL.flush()


INSTRUCTION = "Benchmark session: call your tool once per turn until told otherwise. BENCH"
WARMUP_INSTRUCTION = "WARMUP session: call your tool a few times, then stop."


# ----------------------------------------------------------------------------- timing
class Prof:
    """Exclusive time per category and per step (step = index of the model call)."""

    def __init__(self) -> None:
        self.step = 0
        self.stack: list[list[float]] = []
        self.rows: dict[int, dict[str, float]] = {}
        self.call_starts: list[float] = []

    def reset(self) -> None:
        self.__init__()

    def wrap(self, fn, cat: str, *, counts_step: bool = False):
        prof = self

        def wrapper(*a, **k):
            if counts_step:
                prof.step += 1
                prof.call_starts.append(time.monotonic())
            t0 = time.perf_counter()
            prof.stack.append([0.0])
            try:
                return fn(*a, **k)
            finally:
                el = time.perf_counter() - t0
                child = prof.stack.pop()[0]
                if prof.stack:
                    prof.stack[-1][0] += el
                row = prof.rows.setdefault(prof.step, {})
                row[cat] = row.get(cat, 0.0) + el - child

        return wrapper


# ----------------------------------------------------------------------------- mini-swe-agent
def _mini_agent(url: str, env_kind: str, out: Path, calls: int, prof: Prof | None):
    import yaml
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.config import get_config_path
    from minisweagent.models.litellm_model import LitellmModel

    cfg = yaml.safe_load(Path(get_config_path("mini")).read_text())
    agent_cfg = dict(cfg.get("agent", {}))
    agent_cfg["step_limit"] = calls + 5
    agent_cfg["cost_limit"] = 0
    model_cfg = dict(cfg.get("model", {}))
    model_cfg.pop("model_class", None)
    model_cfg["model_name"] = "openai/mock"
    model_cfg["model_kwargs"] = {**model_cfg.get("model_kwargs", {}), "api_base": url, "api_key": "not-needed",
                                 "temperature": 0.7, "max_tokens": 16000}
    model_cfg["cost_tracking"] = "ignore_errors"
    model = LitellmModel(**model_cfg)
    env = _mini_env(env_kind, out)
    if prof is not None:
        model.query = prof.wrap(model.query, "model_client", counts_step=True)
        env.execute = prof.wrap(env.execute, "tool")
    agent = DefaultAgent(model, env, **agent_cfg, output_path=out / "trajectory.json")
    if prof is not None:
        agent.save = prof.wrap(agent.save, "trace")
        agent.execute_actions = prof.wrap(agent.execute_actions, "dispatch")
    return agent


def _mini_env(kind: str, out: Path):
    from minisweagent.environments.local import LocalEnvironment

    app = out / "app"
    app.mkdir(parents=True, exist_ok=True)
    if kind == "local":
        return LocalEnvironment(cwd=str(app))
    if kind == "bwrap":
        from minisweagent.environments.extra.bubblewrap import BubblewrapEnvironment

        return BubblewrapEnvironment()
    if kind == "noop":
        from minisweagent.exceptions import Submitted

        class NoopEnvironment(LocalEnvironment):
            """In-process: answers at once; the submit command ends the run as in LocalEnvironment."""

            def execute(self, action, cwd="", *, timeout=None):
                if "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in action.get("command", ""):
                    raise Submitted({"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}})
                return {"output": "ok", "returncode": 0, "exception_info": ""}

        return NoopEnvironment(cwd=str(app))
    raise SystemExit(f"unknown mini environment {kind!r}")


def mini_session(url: str, env_kind: str, out: Path, calls: int, instruction: str, prof: Prof | None = None) -> dict:
    agent = _mini_agent(url, env_kind, out, calls, prof)
    res = agent.run(instruction)
    return {"exit_status": res.get("exit_status"), "calls": agent.n_calls}


# ----------------------------------------------------------------------------- openai-agents
def _agents_setup(url: str):
    from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    @function_tool
    async def noop(command: str) -> str:
        """Does nothing and returns at once (benchmarks only).

        Args:
            command: Ignored.
        """
        return "ok"

    client = AsyncOpenAI(base_url=url, api_key="not-needed", max_retries=0)
    model = OpenAIChatCompletionsModel(model="mock", openai_client=client)
    return Agent(name="bench", instructions="You are a software engineer working alone in a terminal.", tools=[noop], model=model)


async def agents_session(agent, instruction: str, calls: int) -> dict:
    from agents import Runner

    res = await Runner.run(agent, instruction, max_turns=calls + 5)
    return {"final_output": str(res.final_output)[:80]}


# ----------------------------------------------------------------------------- smolagents
def _smol_agent(url: str, calls: int):
    from smolagents import OpenAIServerModel, Tool, ToolCallingAgent
    from smolagents.monitoring import LogLevel

    class Noop(Tool):
        name = "noop"
        description = "Does nothing and returns at once (benchmarks only)."
        inputs = {"command": {"type": "string", "description": "Ignored."}}
        output_type = "string"

        def forward(self, command: str) -> str:
            return "ok"

    model = OpenAIServerModel(model_id="mock", api_base=url, api_key="not-needed", temperature=0.7, max_tokens=16000)
    return ToolCallingAgent(tools=[Noop()], model=model, max_steps=calls + 5, verbosity_level=LogLevel.OFF)


# ----------------------------------------------------------------------------- modes
def overhead(args) -> dict:
    out = Path(tempfile.mkdtemp(prefix=f"peer-{args.peer}-"))
    try:
        return _overhead(args, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)  # a benchmark leaves nothing in /tmp


def _overhead(args, out: Path) -> dict:
    prof = Prof() if args.instrument else None
    t0 = t1 = 0.0
    c0 = c1 = None
    if args.peer == "mini":
        mini_session(args.url, args.env, out / "warm", 4, WARMUP_INSTRUCTION)
        c0, t0 = os.times(), time.monotonic()
        info = mini_session(args.url, args.env, out / "run", args.calls, INSTRUCTION, prof)
        t1, c1 = time.monotonic(), os.times()
    elif args.peer == "openai-agents":
        import asyncio

        async def main():
            nonlocal t0, t1, c0, c1
            agent = _agents_setup(args.url)
            await agents_session(agent, WARMUP_INSTRUCTION, 4)
            c0, t0 = os.times(), time.monotonic()
            r = await agents_session(agent, INSTRUCTION, args.calls)
            t1, c1 = time.monotonic(), os.times()
            return r

        info = asyncio.run(main())
    elif args.peer == "smolagents":
        _smol_agent(args.url, 4).run(WARMUP_INSTRUCTION)
        agent = _smol_agent(args.url, args.calls)
        c0, t0 = os.times(), time.monotonic()
        r = agent.run(INSTRUCTION)
        t1, c1 = time.monotonic(), os.times()
        info = {"final_output": str(r)[:80]}
    else:
        raise SystemExit(f"unknown peer {args.peer!r}")
    # CPU of this process and of the children it reaped (mini's subprocess or bwrap per command)
    cpu = sum(b - a for a, b in zip(c0[:4], c1[:4]))
    res = {"ok": True, "t0": t0, "t1": t1, "cpu_sec": cpu, "info": info}
    if prof is not None:
        res["prof"] = {"rows": {str(k): v for k, v in prof.rows.items()}, "call_starts": prof.call_starts}
    return res


def concurrency(args) -> dict:
    """mini-swe-agent's batch mode: one DefaultAgent per instance on a ThreadPoolExecutor
    (what `mini-extra swebench --workers M` does), here with M workers for M sessions."""
    if args.peer != "mini":
        raise SystemExit("the concurrency benchmark runs the mini-swe-agent batch mode only")
    out = Path(tempfile.mkdtemp(prefix="peer-mini-batch-"))
    try:
        return _concurrency(args, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)  # a benchmark leaves nothing in /tmp


def _concurrency(args, out: Path) -> dict:
    import concurrent.futures

    # warm-up in one thread (imports, litellm client caches)
    mini_session(args.url, args.env, out / "warm", 4, WARMUP_INSTRUCTION)
    emit({"ready": True})
    sys.stdin.readline()  # the parent starts sampling, then says go
    results: list[dict] = []
    errors: list[str] = []

    def one(i: int) -> dict:
        return mini_session(args.url, args.env, out / f"s{i:03d}", args.calls, f"{INSTRUCTION} session {i}")

    c0 = os.times()
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.sessions) as ex:
        futs = [ex.submit(one, i) for i in range(args.sessions)]
        for f in concurrent.futures.as_completed(futs):
            try:
                results.append(f.result())
            except Exception as exc:  # noqa: BLE001
                errors.append(f"{type(exc).__name__}: {exc}"[:300])
    t1 = time.monotonic()
    c1 = os.times()
    cpu = (c1.user - c0.user) + (c1.system - c0.system) + (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    calls = sum(r.get("calls", 0) for r in results)
    return {"ok": not errors, "wall_sec": t1 - t0, "cpu_sec": cpu, "sessions_done": len(results), "calls": calls,
            "errors": errors[:5], "exit_statuses": sorted({str(r.get("exit_status")) for r in results})}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["overhead", "concurrency"])
    ap.add_argument("--peer", required=True)
    ap.add_argument("--env", default="noop")
    ap.add_argument("--url", required=True)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--sessions", type=int, default=1)
    ap.add_argument("--instrument", action="store_true")
    args = ap.parse_args()
    import logging

    logging.disable(logging.CRITICAL)
    res = overhead(args) if args.mode == "overhead" else concurrency(args)
    emit(res)


if __name__ == "__main__":
    main()
