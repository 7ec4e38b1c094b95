"""The mock model's policy: rules that map a chat-completions request to a scripted answer.

A policy is YAML (format in docs/mock-policy.md) validated by pydantic, so a typo fails at
load time with one sentence naming the file, the rule and the field — never later as a
silently wrong answer. Templates and regexes are compiled here, once, because the server
matches every request of every benchmark session against them.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from ahe.errors import ConfigError

TEMPLATE_VARS = frozenset({"turn", "instruction", "last_tool_result", "match", "model"})
NO_MATCH_REPLY = "mock: no rule matched"


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


StrList = Annotated[list[str], BeforeValidator(_as_list)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Match(_Strict):
    """Conditions on the request; all given ones must hold. A list of substrings means all of them."""

    model: StrList | None = None  # any of these names (fnmatch globs allowed)
    system_contains: StrList | None = None
    system_not_contains: StrList | None = None
    messages_contain: StrList | None = None
    messages_not_contain: StrList | None = None
    first_user_contains: StrList | None = None
    last_user_contains: StrList | None = None
    last_tool_result_contains: StrList | None = None
    last_tool_result_not_contains: StrList | None = None
    last_tool_result_regex: str | None = None
    tools_include: StrList | None = None
    tools_exclude: StrList | None = None
    turn: int | None = Field(default=None, ge=1)
    turn_min: int | None = Field(default=None, ge=1)
    turn_max: int | None = Field(default=None, ge=1)


class Fault(_Strict):
    """A failure to serve instead of (or, for `hang_sec`, before) the answer."""

    status: int | None = Field(default=None, ge=400, le=599)
    retry_after: float | None = Field(default=None, ge=0)  # Retry-After header, seconds
    retry_after_ms: float | None = Field(default=None, ge=0)  # retry-after-ms header
    message: str | None = None
    hang_sec: float | None = Field(default=None, gt=0)
    garbage: bool | str = False  # True: a fixed non-completion body; a string: that body verbatim
    context_length: bool = False
    disconnect: bool = False  # close the connection without any response

    @model_validator(mode="after")
    def _one_kind(self) -> "Fault":
        kinds = [k for k in ("status", "garbage", "context_length", "disconnect") if getattr(self, k)]
        if len(kinds) > 1:
            raise ValueError(f"a fault has one kind, got {' and '.join(kinds)}")
        if not kinds and self.hang_sec is None:
            raise ValueError("a fault needs one of status, hang_sec, garbage, context_length, disconnect")
        return self


class ToolCallSpec(_Strict):
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class UsageOverride(_Strict):
    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    cached_tokens: int | None = Field(default=None, ge=0)
    reasoning_tokens: int | None = Field(default=None, ge=0)


class Response(_Strict):
    """What the mock answers. `reply` and string tool arguments are Jinja2 templates."""

    reply: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    finish_reason: str | None = None
    latency_sec: float | None = Field(default=None, ge=0)
    usage: UsageOverride | None = None
    fault: Fault | None = None


class Rule(Response):
    name: str | None = None
    match: Match = Field(default_factory=Match)
    times: int | None = Field(default=None, ge=1)
    scope: Literal["conversation", "global"] = "conversation"


CHAOS_KINDS = ("http_429", "http_500", "timeout", "malformed_tool_args", "empty_reply", "prose")


class Chaos(_Strict):
    """Fault injection over a whole policy: a seeded `rate` of all answers is replaced by a fault,
    the kinds taken in turn, so every kind occurs (reliability tests: "20% of model calls faulted")."""

    rate: float = Field(ge=0, le=1)
    seed: int = 0
    kinds: list[Literal[CHAOS_KINDS]] = Field(default_factory=lambda: list(CHAOS_KINDS))  # type: ignore[valid-type]
    hang_sec: float = Field(default=3.0, gt=0)  # for `timeout`: longer than the client's timeout_sec
    prose: str = "I have thought about this carefully and I believe the task is essentially complete."


class Policy(_Strict):
    """A whole policy; `compiled()` gives the ready-to-match form (built once, cached)."""

    name: str | None = None
    latency_sec: float = Field(default=0.0, ge=0)  # for rules that set none
    chaos: Chaos | None = None
    rules: list[Rule] = Field(default_factory=list)
    default: Response = Field(default_factory=lambda: Response(reply=NO_MATCH_REPLY))
    _source: str = PrivateAttr(default="<inline policy>")
    _compiled: Any = PrivateAttr(default=None)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<inline policy>") -> "Policy":
        """Validate and compile; any problem is a ConfigError naming source, rule and field."""
        if not isinstance(data, dict):
            raise ConfigError(f"Mock policy {source} must be a mapping with `rules:` at the top level.")
        try:
            policy = cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(_describe(exc, data, source)) from None
        policy._source = source
        policy.compiled()
        return policy

    @property
    def source(self) -> str:
        return self._source

    def compiled(self) -> "CompiledPolicy":
        if self._compiled is None:
            self._compiled = CompiledPolicy(self)
        return self._compiled


def load_policy(path: str | Path) -> Policy:
    """Read a policy YAML file; every error is a ConfigError that names the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"Cannot read mock policy {path}: {exc.strerror or exc}.") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"Mock policy {path} is not valid YAML{where}: {getattr(exc, 'problem', exc)}.") from None
    if data is None:
        raise ConfigError(f"Mock policy {path} is empty; it needs at least `rules:` or `default:`.")
    return Policy.from_dict(data, source=str(path))


# --- error messages ------------------------------------------------------------------------

_FIELD_NAMES = {
    name
    for model in (Match, Fault, ToolCallSpec, UsageOverride, Response, Rule, Policy)
    for name in model.model_fields
}


def _where(source: str, data: Any, loc: tuple[Any, ...], unknown_key: bool = False) -> str:
    """'Mock policy F, rules[2] ("name"), field `match.turn`' from a pydantic location.

    Pydantic adds type tags ('str', 'function-before[...]') to locations of union fields;
    only real field names and list indexes are kept (plus the offending key when unknown).
    """
    last = len(loc) - 1
    parts = [p for i, p in enumerate(loc) if isinstance(p, int) or p in _FIELD_NAMES or (unknown_key and i == last)]
    rule = ""
    if len(parts) >= 2 and parts[0] == "rules" and isinstance(parts[1], int):
        idx = parts[1]
        rule = f", rules[{idx}]"
        try:
            name = data["rules"][idx].get("name")
        except (KeyError, IndexError, TypeError, AttributeError):
            name = None
        if name:
            rule += f' ("{name}")'
        parts = parts[2:]
    field = ""
    for p in parts:
        field += f"[{p}]" if isinstance(p, int) else (f".{p}" if field else str(p))
    return f"Mock policy {source}{rule}, field `{field or '(top level)'}`"


def _describe(exc: ValidationError, data: Any, source: str) -> str:
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    msg = err["msg"]
    unknown = err["type"] == "extra_forbidden"
    if unknown:
        close = difflib.get_close_matches(str(loc[-1]), sorted(_FIELD_NAMES), n=1)
        msg = "unknown field" + (f" (did you mean `{close[0]}`?)" if close else "")
    msg = msg.removeprefix("Value error, ")
    where = _where(source, data, loc, unknown)
    others = {_where(source, data, tuple(e["loc"])) for e in exc.errors()[1:]} - {where}
    more = f" (and {len(others)} more problem(s))" if others else ""
    return f"{where}: {msg}{more}."


# --- compiled form -------------------------------------------------------------------------


class Text:
    """A string field: verbatim when it has no Jinja2 syntax (the fast path), else a template."""

    __slots__ = ("source", "template")

    def __init__(self, source: str, template: Any) -> None:
        self.source = source
        self.template = template

    def render(self, ctx: dict[str, Any]) -> str:
        return self.source if self.template is None else self.template.render(ctx)


_env = None


def _jinja():
    global _env
    if _env is None:
        import jinja2

        _env = jinja2.Environment(autoescape=False, keep_trailing_newline=True)
    return _env


def _text(value: str, where: str, field: str) -> Text:
    if "{{" not in value and "{%" not in value and "{#" not in value:
        return Text(value, None)
    import jinja2
    from jinja2 import meta

    env = _jinja()
    try:
        unknown = meta.find_undeclared_variables(env.parse(value)) - TEMPLATE_VARS
        template = env.from_string(value)
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"{where}, field `{field}`: bad Jinja2 template (line {exc.lineno}: {str(exc.message).rstrip('.')}).") from None
    if unknown:
        raise ConfigError(
            f"{where}, field `{field}`: unknown template variable(s) {', '.join(sorted(unknown))}"
            f" (available: {', '.join(sorted(TEMPLATE_VARS))})."
        )
    return Text(value, template)


def _compile_args(value: Any, where: str, field: str) -> Any:
    if isinstance(value, str):
        return _text(value, where, field)
    if isinstance(value, dict):
        return {k: _compile_args(v, where, f"{field}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_compile_args(v, where, f"{field}[{i}]") for i, v in enumerate(value)]
    return value


def _has_template(value: Any) -> bool:
    if isinstance(value, Text):
        return value.template is not None
    if isinstance(value, dict):
        return any(_has_template(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_template(v) for v in value)
    return False


def render_args(value: Any, ctx: dict[str, Any]) -> Any:
    if isinstance(value, Text):
        return value.render(ctx)
    if isinstance(value, dict):
        return {k: render_args(v, ctx) for k, v in value.items()}
    if isinstance(value, list):
        return [render_args(v, ctx) for v in value]
    return value


class CompiledToolCall:
    """`static` holds the final argument string when nothing in it is templated."""

    __slots__ = ("name", "static", "args")

    def __init__(self, spec: ToolCallSpec, where: str, field: str) -> None:
        self.name = spec.name
        if isinstance(spec.arguments, str):  # raw: sent verbatim, never templated
            self.static, self.args = spec.arguments, None
            return
        args = _compile_args(spec.arguments, where, f"{field}.arguments")
        if _has_template(args):
            self.static, self.args = None, args
        else:
            self.static, self.args = json.dumps(spec.arguments, ensure_ascii=False), None

    def arguments(self, ctx: dict[str, Any]) -> str:
        if self.static is not None:
            return self.static
        return json.dumps(render_args(self.args, ctx), ensure_ascii=False)


class CompiledResponse:
    __slots__ = ("label", "reply", "reasoning", "tool_calls", "finish_reason", "latency_sec", "usage", "fault")

    def __init__(self, resp: Response, where: str, label: str, default_latency: float) -> None:
        self.label = label
        self.reply = _text(resp.reply, where, "reply") if resp.reply is not None else None
        self.reasoning = _text(resp.reasoning, where, "reasoning") if resp.reasoning is not None else None
        self.tool_calls = [CompiledToolCall(tc, where, f"tool_calls[{i}]") for i, tc in enumerate(resp.tool_calls)]
        self.finish_reason = resp.finish_reason
        self.latency_sec = resp.latency_sec if resp.latency_sec is not None else default_latency
        self.usage = resp.usage.model_dump(exclude_none=True) if resp.usage else {}
        self.fault = resp.fault


class CompiledRule(CompiledResponse):
    __slots__ = ("index", "match", "regex", "times", "scope")

    def __init__(self, index: int, rule: Rule, source: str, default_latency: float) -> None:
        label = rule.name or f"rules[{index}]"
        where = f"Mock policy {source}, rules[{index}]" + (f' ("{rule.name}")' if rule.name else "")
        super().__init__(rule, where, label, default_latency)
        self.index = index
        self.match = rule.match
        self.times = rule.times
        self.scope = rule.scope
        self.regex = None
        if rule.match.last_tool_result_regex is not None:
            try:
                self.regex = re.compile(rule.match.last_tool_result_regex)
            except re.error as exc:
                raise ConfigError(f"{where}, field `match.last_tool_result_regex`: bad regular expression ({exc}).") from None


class CompiledPolicy:
    def __init__(self, policy: Policy) -> None:
        src = policy.source
        self.rules = [CompiledRule(i, r, src, policy.latency_sec) for i, r in enumerate(policy.rules)]
        self.default = CompiledResponse(policy.default, f"Mock policy {src}, default", "default", policy.latency_sec)
        self.model_names = sorted(
            {m for r in policy.rules for m in (r.match.model or []) if not any(c in m for c in "*?[")}
        )
