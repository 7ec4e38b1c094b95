"""`ahe doctor`: what is installed and reachable, and the command that fixes each gap."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def _python() -> Check:
    v = sys.version_info
    ok = v >= (3, 11)
    return Check("python", ok, f"{sys.executable} {v.major}.{v.minor}.{v.micro}", "" if ok else "install Python 3.11 or newer")


def _bwrap() -> Check:
    try:
        from ahe.sandbox.local import LocalSandbox

        ok, why = LocalSandbox.available()
    except Exception as exc:  # the backend module itself is broken
        ok, why = False, f"local sandbox unavailable: {exc}"
    return Check(
        "bubblewrap (local sandbox)",
        ok,
        why,
        "" if ok else "apt-get install -y bubblewrap  (without it commands run with NO isolation)",
    )


def _docker() -> Check:
    if shutil.which("docker") is None and shutil.which("dockerd") is None:
        return Check("docker engine (docker sandbox)", False, "no docker client or engine found",
                     "apt-get install -y docker.io", required=False)
    try:
        from ahe.sandbox.docker import engine_status

        ok, why = engine_status()
    except Exception as exc:
        ok, why = False, str(exc)
    fix = "" if ok else "dockerd --storage-driver=vfs --iptables=false --ip6tables=false --bridge=none &  (as root)"
    return Check("docker engine (docker sandbox)", ok, why, fix, required=False)


def _git() -> Check:
    if shutil.which("git") is None:
        return Check("git", False, "git not found", "apt-get install -y git")
    vals = {}
    for key in ("user.name", "user.email"):
        p = subprocess.run(["git", "config", "--global", key], capture_output=True, text=True)
        vals[key] = p.stdout.strip()
    ok = all(vals.values())
    detail = ", ".join(f"{k}={v or '(unset)'}" for k, v in vals.items())
    fix = "" if ok else 'git config --global user.name "AHE" && git config --global user.email ahe@localhost  (AHE sets its own identity in the harness repo if unset)'
    return Check("git identity", ok, detail, fix, required=False)


def _endpoint() -> Check:
    base = os.environ.get("OPENAI_BASE_URL")
    model = os.environ.get("AHE_MODEL")
    key = "set" if os.environ.get("OPENAI_API_KEY") else "unset"
    if not base and not model:
        return Check(
            "model endpoint",
            False,
            "OPENAI_BASE_URL and AHE_MODEL are unset",
            "export OPENAI_BASE_URL=https://.../v1 AHE_MODEL=<model> OPENAI_API_KEY=...  (or use --mock-policy for the scripted mock)",
            required=False,
        )
    detail = f"base_url={base or '(OpenAI default)'} model={model or '(unset)'} api_key={key}"
    if base:
        import urllib.error
        import urllib.request

        req = urllib.request.Request(base.rstrip("/") + "/models", headers={"Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}"})
        try:
            with urllib.request.urlopen(req, timeout=3) as r:
                detail += f"; GET /models → {r.status}"
        except urllib.error.HTTPError as exc:
            detail += f"; GET /models → HTTP {exc.code}"
        except Exception as exc:
            return Check("model endpoint", False, f"{detail}; unreachable: {exc}", "check OPENAI_BASE_URL and the network", required=False)
    ok = bool(model)
    return Check("model endpoint", ok, detail, "" if ok else "export AHE_MODEL=<model name>", required=False)


def run_doctor(*, json_out: bool | str = False, ray_address: str | None = None) -> bool:
    """`json_out`: True, or the output format (table, markdown, json; ahe.tables)."""
    from ahe.tables import TableOutput

    out = TableOutput(json_out)
    json_out = out.fmt == "json"
    from ahe.rollout.ray_doctor import ray_checks

    checks = [_python(), _bwrap(), _docker(), _git(), _endpoint(), *ray_checks(ray_address, Check)]
    ok = all(c.ok for c in checks if c.required)
    if json_out:
        print(json.dumps({"ok": ok, "checks": [asdict(c) for c in checks]}, indent=2))
        return ok
    from rich.table import Table

    table = Table(title="ahe doctor")
    for col in ("check", "status", "detail", "fix"):
        table.add_column(col, overflow="fold")
    for c in checks:
        status = "[green]ok[/]" if c.ok else ("[red]missing[/]" if c.required else "[yellow]optional[/]")
        table.add_row(c.name, status, c.detail, c.fix)
    out.print(table)
    return ok
