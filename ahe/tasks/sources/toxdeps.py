"""A project's test dependencies as tox reads them (standard library only).

tox installs the project (with the `extras` of its test environment) and then the `deps` of
that environment. Both may be factor-conditional (`py311: mock`, `!py27: trio`,
`py{310,311}-cov: pytest-cov`); the environment that runs the tests here is the one of
`env_list` matching the interpreter (py311 for Python 3.11), whose factors are its name's
parts between hyphens. `-r FILE` lines are read relative to tox.ini, `-c` constraint files
are left out, `.[x]` / `-e .[x]` add extras. The config is tox.ini, `[tool.tox]
legacy_tox_ini` or tox 4's `[tool.tox.env_run_base]` in pyproject.toml, or setup.cfg's
`[tox:tox]` with `[testenv]`.
"""

from __future__ import annotations

import configparser
import re
import tomllib
from pathlib import Path

from pydantic import BaseModel, Field

_FACTOR_EXPR = re.compile(r"^[\w{}.!,\-\s]+$")
_EXTRAS_OF_SELF = re.compile(r"^(?:-e\s*)?\./?\[([^\]]+)\]$")


class ToxEnv(BaseModel):
    """What tox would install for the test environment of this interpreter."""

    name: str = ""  # the environment picked, e.g. py311 ("" when the project has no tox config)
    deps: list[str] = Field(default_factory=list)
    extras: list[str] = Field(default_factory=list)
    skip_install: bool = False


def expand_braces(text: str) -> list[str]:
    """`py{310,311}-cov` -> py310-cov, py311-cov (nested groups expand left to right)."""
    m = re.search(r"\{([^{}]*)\}", text)
    if not m:
        return [text]
    out: list[str] = []
    for alt in m.group(1).split(","):
        out += expand_braces(text[: m.start()] + alt.strip() + text[m.end():])
    return out


def _split_envs(value: str) -> list[str]:
    """env_list / envlist: commas and new lines outside braces separate environments."""
    parts, depth, cur = [], 0, ""
    for ch in value:
        depth += ch == "{"
        depth -= ch == "}"
        if ch in ",\n" and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [e.strip() for p in parts if p.strip() for e in expand_braces(p.strip())]


def pick_env(envs: list[str], version: tuple[int, int]) -> str:
    """The environment tox would run the tests in on this Python (default py<maj><min>)."""
    exact = {f"py{version[0]}{version[1]}", f"py{version[0]}.{version[1]}"}
    for wanted in (exact, {f"py{version[0]}", "py"}):
        for env in envs:
            if wanted & set(env.split("-")):
                return env
    return f"py{version[0]}{version[1]}"


def _applies(expr: str, factors: set[str]) -> bool:
    """A factor condition: alternatives (commas, braces) OR'ed, hyphen-joined factors AND'ed."""
    for alt in _split_envs(expr.replace("\n", " ")):
        if all((f[1:] not in factors) if f.startswith("!") else (f in factors) for f in alt.split("-") if f):
            return True
    return False


def filter_factors(value: str, factors: set[str]) -> list[str]:
    """The lines of a setting that apply to an environment with these factors."""
    out = []
    for line in value.replace("\\\n", " ").splitlines():
        line = line.strip()
        head, sep, rest = line.partition(":")
        if sep and rest[:1] in (" ", "\t", "") and _FACTOR_EXPR.match(head) and not head.strip().startswith("-"):
            if not _applies(head.strip(), factors):
                continue
            line = rest.strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def _config(root: Path) -> configparser.ConfigParser | None:
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        if (root / "tox.ini").is_file():
            cfg.read(root / "tox.ini", encoding="utf-8")
            return cfg
        legacy = (_pyproject_tox(root) or {}).get("legacy_tox_ini")
        if isinstance(legacy, str):
            cfg.read_string(legacy)
            return cfg
        if (root / "setup.cfg").is_file():
            cfg.read(root / "setup.cfg", encoding="utf-8")
            if cfg.has_section("tox:tox") or cfg.has_section("testenv"):
                return cfg
    except configparser.Error:
        pass
    return None


def _pyproject_tox(root: Path) -> dict | None:
    try:
        return tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8")).get("tool", {}).get("tox")
    except (OSError, tomllib.TOMLDecodeError):
        return None


def _requirement_file(root: Path, rel: str, seen: set[Path]) -> list[str]:
    path = (root / rel).resolve()
    if path in seen:
        return []
    seen.add(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return _expand(path.parent, [ln.split(" #", 1)[0].strip() for ln in lines], seen, [])


def _expand(root: Path, lines: list[str], seen: set[Path], extras: list[str]) -> list[str]:
    out = []
    for line in lines:
        line = line.replace("{toxinidir}", ".").strip()  # the project itself, or a file beside tox.ini
        m = _EXTRAS_OF_SELF.match(line)
        if m:
            extras += [e.strip() for e in m.group(1).split(",") if e.strip()]
        elif line.startswith("-r") or line.startswith("--requirement"):
            out += _requirement_file(root, line.split(None, 1)[-1] if " " in line else line[2:], seen)
        elif line and not line.startswith(("-", "#")):
            out.append(line)
    return out


def _toml_env(root: Path, version: tuple[int, int]) -> ToxEnv | None:
    """tox 4's native `[tool.tox.env_run_base]` (lists, no factor lines)."""
    base = (_pyproject_tox(root) or {}).get("env_run_base")
    if not isinstance(base, dict):
        return None
    lines = [d for d in base.get("deps") or [] if isinstance(d, str)]
    extras = [e for e in base.get("extras") or [] if isinstance(e, str)]
    deps = _expand(root, lines, set(), extras)
    return ToxEnv(name=pick_env([], version), deps=deps, extras=extras,
                  skip_install=bool(base.get("skip_install")) or base.get("package") == "skip")


def tox_env(root: Path, version: tuple[int, int]) -> ToxEnv:
    """deps, extras and skip_install of the tox environment that would run the tests here."""
    cfg = _config(root)
    if cfg is None or not cfg.has_section("testenv"):
        return _toml_env(root, version) or ToxEnv()
    tox_section = "tox" if cfg.has_section("tox") else "tox:tox"
    envs = _split_envs(cfg.get(tox_section, "env_list", fallback="") or cfg.get(tox_section, "envlist", fallback=""))
    name = pick_env(envs, version)
    own = f"testenv:{name}"
    factors = set(name.split("-"))

    def setting(key: str) -> str:
        base = cfg.get("testenv", key, fallback="")
        if cfg.has_option(own, key):
            return cfg.get(own, key).replace(f"{{[testenv]{key}}}", base)
        return base

    extras = [e for ln in filter_factors(setting("extras"), factors) for e in re.split(r"[,\s]+", ln) if e]
    deps = _expand(root, filter_factors(setting("deps"), factors), set(), extras)
    skip = setting("skip_install").strip().lower() == "true" or setting("package").strip() == "skip"
    return ToxEnv(name=name, deps=deps, extras=extras, skip_install=skip)
