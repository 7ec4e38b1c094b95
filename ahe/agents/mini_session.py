"""Inside the confined worker: one mini-swe-agent session, mini's own agent loop driving.

The worker calls `run(job, channel, trace_dir)` (ConfinedSessionSpec.runner). mini's classes
are built from the harness's config as mini builds them, with two parts of AHE's:

- `GatewayModel`, mini's Model protocol over the worker's socket: each query is one request to
  the host's gateway (which holds the key, meters the usage and records the conversation); the
  reply's actions are parsed by mini's own parsers (tool calls, or the text-based regex).
- the trial's sandbox as mini's shell: mini's LocalEnvironment (and any subclass of it the
  harness brings) runs its commands through `_run`, which here sends them to the sandbox.

mini's loop is synchronous, so it runs in a thread; its model and shell calls hop back onto the
worker's event loop, which owns the socket. Harness code (a custom agent or environment class)
is imported here, in the jail, never in AHE's process.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from jinja2 import Environment as JinjaEnvironment, TemplateSyntaxError
from pydantic import BaseModel, ConfigDict, ValidationError

from ahe.agents import mini_config as mc
from ahe.agents.mini_trajectory import counts, mini_events, mini_to_atif, stop_of
from ahe.errors import ConfigError
from ahe.llm.types import LLMSettings
from ahe.runtime.results import SessionResult

QUIET = {"MSWEA_SILENT_STARTUP": "1", "MSWEA_GLOBAL_CONFIG_DIR": "/tmp/.mini-swe-agent",
         "MSWEA_COST_TRACKING": "ignore_errors"}
SETTING_KEYS = ("temperature", "max_tokens", "top_p", "reasoning_effort")
LIVE_SEC = 1.0
# mini's defaults for a config that sets none (its LitellmModelConfig / LitellmTextbasedModelConfig)
OBSERVATION_DEFAULT = ("{% if output.exception_info %}<exception>{{output.exception_info}}</exception>\n{% endif %}"
                       "<returncode>{{output.returncode}}</returncode>\n<output>\n{{output.output}}</output>")
TEXT_ACTION_REGEX = r"```mswea_bash_command\s*\n(.*?)\n```"
TEXT_FORMAT_ERROR = "Please always provide EXACTLY ONE action in triple backticks, found {{actions|length}} actions."


def _mini(module: str) -> Any:
    """A module of mini-swe-agent (imported here, in the jail, only when a session needs it)."""
    try:
        return importlib.import_module(f"minisweagent.{module}" if module else "minisweagent")
    except ImportError as exc:
        from ahe.errors import ConfigError

        raise ConfigError(f"mini-swe-agent is not installed ({exc}); install the extra: pip install 'ahe[mini]'") from None



class ModelSettings(BaseModel):
    """The model section as this backend reads it: mini's templates and parsing; the model's name
    and endpoint are AHE's (the role's), its sampling keys become the gateway's settings."""

    model_config = ConfigDict(extra="ignore", protected_namespaces=())  # mini's own `model_*` keys

    model_name: str = ""
    model_class: str = ""
    model_kwargs: dict[str, Any] = {}
    observation_template: str = OBSERVATION_DEFAULT
    format_error_template: str = "{{ error }}"
    action_regex: str = TEXT_ACTION_REGEX
    multimodal_regex: str = ""

    def llm_settings(self) -> LLMSettings | None:
        picked = {k: self.model_kwargs[k] for k in SETTING_KEYS if k in self.model_kwargs}
        return LLMSettings(**picked) if picked else None


class GatewayModel:
    """mini's Model protocol; every query goes through the host's gateway (no key in the jail)."""

    def __init__(self, settings: ModelSettings, client: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.config, self.client, self.loop = settings, client, loop
        self.textual = settings.model_class in mc.TEXT_MODELS
        if self.textual and "format_error_template" not in settings.model_fields_set:
            settings.format_error_template = TEXT_FORMAT_ERROR
        self.llm = settings.llm_settings()

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        BASH_TOOL = _mini("models.utils.actions_toolcall").BASH_TOOL

        prepared = [{k: v for k, v in m.items() if k != "extra"} for m in messages]
        tools = None if self.textual else [BASH_TOOL]
        resp = asyncio.run_coroutine_threadsafe(
            self.client.complete(prepared, tools=tools, settings=self.llm), self.loop).result()
        usage = resp.usage.model_dump()
        cost = {"cost": float(resp.usage.cost_usd or 0.0)}
        finish = {"finish_reason": resp.finish_reason}
        FormatError = _mini("exceptions").FormatError

        try:
            actions = self._actions(resp, finish)
        except FormatError as e:
            e.messages[0]["extra"].update(cost, usage=usage, model_response=resp.content or "")
            raise
        message = resp.assistant_message()  # sent back as it is: the model's own reply
        message["extra"] = {"actions": actions, "usage": usage, "model_name": resp.model, **cost,
                            "timestamp": time.time(), "reasoning_content": resp.reasoning_content}
        return message

    def _actions(self, resp: Any, finish: dict) -> list[dict]:
        if self.textual:
            parse_regex_actions = _mini("models.utils.actions_text").parse_regex_actions

            return parse_regex_actions(resp.content or "", action_regex=self.config.action_regex,
                                       format_error_template=self.config.format_error_template, template_kwargs=finish)
        parse_toolcall_actions = _mini("models.utils.actions_toolcall").parse_toolcall_actions

        calls = [SimpleNamespace(id=tc.id, function=SimpleNamespace(name=tc.name, arguments=tc.raw_arguments))
                 for tc in resp.tool_calls]
        return parse_toolcall_actions(calls, format_error_template=self.config.format_error_template,
                                      template_kwargs=finish)

    def format_message(self, **kwargs: Any) -> dict:
        expand_multimodal_content = _mini("models.utils.openai_multimodal").expand_multimodal_content

        return expand_multimodal_content(kwargs, pattern=self.config.multimodal_regex)

    def format_observation_messages(self, message: dict, outputs: list[dict], template_vars: dict | None = None) -> list[dict]:
        if self.textual:
            format_observation_messages = _mini("models.utils.actions_text").format_observation_messages

            return format_observation_messages(outputs, observation_template=self.config.observation_template,
                                               template_vars=template_vars, multimodal_regex=self.config.multimodal_regex)
        format_toolcall_observation_messages = _mini("models.utils.actions_toolcall").format_toolcall_observation_messages

        return format_toolcall_observation_messages(
            actions=message.get("extra", {}).get("actions", []), outputs=outputs,
            observation_template=self.config.observation_template, template_vars=template_vars,
            multimodal_regex=self.config.multimodal_regex)

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return self.config.model_dump()

    def serialize(self) -> dict:
        return {"info": {"config": {"model": self.config.model_dump(mode="json"), "model_type": "ahe-gateway"}}}


def _sandbox_shell(sandbox: Any, loop: asyncio.AbstractEventLoop):
    """mini's `_run(command, cwd, env, timeout)`, run in the trial's sandbox (stderr into stdout, as mini's)."""
    base = dict(os.environ)

    def run(command: str, cwd: str, env: dict[str, str], timeout: int) -> subprocess.CompletedProcess:
        extra = {k: v for k, v in env.items() if base.get(k) != v}  # the config's env, not the jail's
        res = asyncio.run_coroutine_threadsafe(
            sandbox.exec("exec 2>&1\n" + command, timeout=timeout, cwd=cwd or None, env=extra or None), loop).result()
        out = res.stdout + res.stderr
        if res.timed_out:
            raise subprocess.TimeoutExpired(command, timeout, output=out)
        return subprocess.CompletedProcess(command, res.exit_code, stdout=out)

    return run


def _where(path: str, sect: str, err: Any) -> str:
    loc = ".".join(str(p) for p in err.get("loc", ())) if isinstance(err, dict) else ""
    return f"{path}: field '{sect}{'.' + loc if loc else ''}'"


def _check_templates(path: str, agent: dict, model: ModelSettings) -> None:
    env = JinjaEnvironment()
    fields = [("agent", k, agent.get(k)) for k in ("system_template", "instance_template")]
    fields += [("model", k, getattr(model, k)) for k in ("observation_template", "format_error_template")]
    for sect, key, text in fields:
        if isinstance(text, str):
            try:
                env.parse(text)
            except TemplateSyntaxError as exc:
                raise ConfigError(f"{path}: field '{sect}.{key}' is not a valid jinja2 template "
                                  f"(line {exc.lineno}: {exc.message})") from None


def build(workspace: Path, working_directory: str, client: Any = None, loop: Any = None):
    """(agent, model, env) as mini builds them from the harness's config; ConfigError naming the
    file and field for what mini (or this backend) would reject."""
    name = mc.config_name(workspace)
    data = mc.read_config(workspace, name)
    path = str(Path(workspace) / name)
    agent_cfg, env_cfg = mc.section(data, "agent"), mc.section(data, "environment")
    try:
        settings = ModelSettings.model_validate(mc.section(data, "model"))
    except ValidationError as exc:
        raise ConfigError(f"{_where(path, 'model', exc.errors()[0])}: {exc.errors()[0]['msg']}") from None
    try:
        model = GatewayModel(settings, client, loop)
    except ValidationError as exc:  # a sampling key of model_kwargs
        raise ConfigError(f"{_where(path, 'model.model_kwargs', exc.errors()[0])}: {exc.errors()[0]['msg']}") from None
    _check_templates(path, agent_cfg, model.config)
    if str(workspace) not in sys.path:
        sys.path.insert(0, str(workspace))  # the harness's own classes (agent_class, environment_class)
    get_agent_class = _mini("agents").get_agent_class
    get_environment_class = _mini("environments").get_environment_class

    env_class = str(env_cfg.pop("environment_class", "") or "local")
    if env_class in mc.BUILTIN_ENVIRONMENTS:  # the trial's sandbox is the environment
        env_class, env_cfg = "local", {k: env_cfg[k] for k in mc.SANDBOX_ENV_KEYS if k in env_cfg}
    env_cfg.setdefault("cwd", working_directory)
    agent_cfg.pop("output_path", None)  # the trajectory is AHE's (trajectory.json), not a file of the jail's
    agent_class = str(agent_cfg.pop("agent_class", "") or "default")
    if agent_class == "interactive":  # no one to confirm: the default loop
        agent_class = "default"
    env_cls = _class(path, "environment.environment_class", env_class, get_environment_class)
    agent_cls = _class(path, "agent.agent_class", agent_class, get_agent_class)
    env = _construct(path, "environment", lambda: env_cls(**env_cfg))
    agent = _construct(path, "agent", lambda: agent_cls(model, env, **agent_cfg))
    return agent, model, env


def _class(path: str, field: str, name: str, get: Any) -> type:
    try:
        return get(name)
    except ValueError:  # mini's "Unknown ... type" (the import failed, or no such class)
        raise ConfigError(f"{path}: field '{field}': cannot import {name!r} — a custom class must be "
                          "`module.Class` with module.py in the harness folder") from None


def _render_check(agent: Any, workspace: Path) -> None:
    """mini renders its two templates first thing, with StrictUndefined: a variable no part
    provides fails every session, so the load check renders them (with a stand-in task)."""
    render = getattr(agent, "_render_template", None)
    if render is None:  # a custom agent class that renders its own way
        return
    agent.extra_template_vars = {**getattr(agent, "extra_template_vars", {}), "task": "(the task)"}
    for key in ("system_template", "instance_template"):
        try:
            render(getattr(agent.config, key))
        except Exception as exc:  # noqa: BLE001 - jinja2's errors, a custom get_template_vars
            path = Path(workspace) / mc.config_name(workspace)
            raise ConfigError(f"{path}: field 'agent.{key}' does not render: {type(exc).__name__}: {exc}") from None


def _construct(path: str, sect: str, make: Any) -> Any:
    try:
        return make()
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"{_where(path, sect, err)}: {err['msg']}") from None
    except TypeError as exc:
        raise ConfigError(f"{path}: field '{sect}': {exc}") from None


async def run(job: dict[str, Any], channel: Any, trace_dir: Path) -> dict[str, Any]:
    """The worker's `done` message for one mini session (or for a load check)."""
    for k, v in QUIET.items():
        os.environ.setdefault(k, v)
    loop = asyncio.get_running_loop()
    workspace, wd = Path(job["workspace"]), job.get("working_directory") or "/app"
    from ahe.confine.remote import GatewayClient, SandboxProxy

    client = GatewayClient(channel, job.get("role", "agent"), job.get("model") or "model")
    try:
        agent, _, _ = await asyncio.to_thread(build, workspace, wd, client, loop)
    except ImportError as exc:
        return {"failure": f"mini-swe-agent is not installed (pip install 'ahe[mini]'): {exc}", "config_error": True}
    except ConfigError as exc:
        return {"failure": str(exc), "config_error": True}
    if job.get("check"):
        try:
            _render_check(agent, workspace)
        except ConfigError as exc:
            return {"failure": str(exc), "config_error": True}
        return {"loaded": True}
    if job.get("sandbox"):
        local = _mini("environments.local")

        sandbox = SandboxProxy(channel)
        if job.get("direct_exec"):  # commands straight to the sandbox's driver, as AHE's sessions do
            from ahe.confine.direct import DirectSandbox

            sandbox = DirectSandbox(channel, job["direct_exec"])
        local._run = _sandbox_shell(sandbox, loop)
    wall = job.get("wall_clock_sec")
    limit = getattr(agent.config, "wall_time_limit_seconds", None)
    if wall and isinstance(limit, int) and (limit <= 0 or limit > wall):
        agent.config.wall_time_limit_seconds = max(1, int(wall))
    return await _run_agent(agent, job, trace_dir)


async def _run_agent(agent: Any, job: dict[str, Any], trace_dir: Path) -> dict[str, Any]:
    minisweagent = _mini("")

    session_id = job.get("session_id") or "mini"
    meta = {"name": "mini-swe-agent", "version": minisweagent.__version__,
            "agent_class": f"{type(agent).__module__}.{type(agent).__name__}"}
    traj, events, started = trace_dir / "trajectory.json", trace_dir / "events.jsonl", time.time()

    def write(complete: bool, extra: dict | None = None) -> None:
        messages = list(agent.messages)
        data = mini_to_atif(messages, session_id=session_id, agent=meta, extra=extra, complete=complete)
        end = None if extra is None else {"ts": time.time(), **{k: extra[k] for k in ("stop_reason", "detail", "turns",
                                                                                      "duration_sec")}}
        rows = mini_events(messages, session_id=session_id, started=started, end=end)
        # written in place: a temporary file beside them would be synced to the host, which
        # refuses any name a session does not write; the final copy is taken after the last write
        traj.write_text(json.dumps(data, ensure_ascii=False))
        events.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))

    t0 = time.monotonic()
    task = asyncio.ensure_future(asyncio.to_thread(agent.run, job["instruction"]))
    while not task.done():  # the trace so far, for the live view and a worker killed at its wall clock
        await asyncio.wait({task}, timeout=LIVE_SEC)
        if not task.done():
            await asyncio.to_thread(write, False)
    exc = task.exception()
    info = task.result() if exc is None else {}
    messages = list(agent.messages)
    exit_status = str((info or {}).get("exit_status") or next(
        (m.get("extra", {}).get("exit_status", "") for m in reversed(messages) if m.get("role") == "exit"), ""))
    stop, detail, kind = stop_of(exit_status, exc)
    turns, calls, errors = counts(messages)
    turns = int(getattr(agent, "n_calls", turns) or turns)  # model calls, malformed replies included
    res = SessionResult(session_id=session_id, agent="mini-swe-agent", stop_reason=stop, detail=detail,
                        final_answer=(info or {}).get("submission") or None, turns=turns, tool_calls=calls,
                        tool_errors=errors, duration_sec=round(time.monotonic() - t0, 4), infra_error_kind=kind)
    write(True, {"stop_reason": stop.value, "detail": detail, "final_answer": res.final_answer,
                 "duration_sec": res.duration_sec, "tool_calls": calls, "tool_errors": errors, "turns": turns})
    return {"result": res.model_dump(mode="json")}
