"""`ahe doctor`: what is installed and reachable, and the command that fixes each gap."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Callable


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


def _docker_checks() -> list[Check]:
    """The engine, and when it answers, whether it can run the harness's confined worker (a
    container started with this machine's interpreter, as every docker trial's worker is)."""
    engine = _docker()
    if not engine.ok:
        return [engine]
    name = "harness worker's container (docker sandbox)"
    try:
        from ahe.confine.container import ready_for_workers

        image = ready_for_workers()
    except Exception as exc:
        return [engine, Check(name, False, str(exc), "use a local engine of this machine's architecture, "
                              "or --sandbox local", required=False)]
    return [engine, Check(name, True, f"this machine's interpreter starts in {image}", "", required=False)]


def _git() -> Check:
    if shutil.which("git") is None:
        return Check("git", False, "git not found", "apt-get install -y git")
    vals = {}
    for key in ("user.name", "user.email"):
        p = subprocess.run(["git", "config", "--global", key], capture_output=True, text=True, timeout=CHECK_LIMIT_SEC)
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


CHECK_LIMIT_SEC = 10.0  # each check: a package, a binary, a local engine, one HTTP request
RAY_LIMIT_SEC = 40.0  # joining a cluster: import Ray, probe the address, ray.init (bounded at 30 s itself)


def bounded(name: str, run: Callable[[], list[Check]], limit: float, fix: str = "") -> Callable[[], list[Check]]:
    """`run` in a daemon thread, waited for at most `limit` seconds: a check that does not answer
    is reported as such, and the doctor ends anyway (a daemon thread does not hold the process)."""

    def wait() -> list[Check]:
        box: list = []

        def target() -> None:
            try:
                box.append(run())
            except Exception as exc:  # a broken check is a failed check, not a crashed doctor
                box.append([Check(name, False, f"{type(exc).__name__}: {exc}", fix, required=False)])

        worker = threading.Thread(target=target, name=f"doctor-{name}", daemon=True)
        worker.start()
        worker.join(limit)
        return box[0] if box else [Check(name, False, f"no answer within {limit:g}s", fix, required=False)]

    return wait


def run_doctor(*, json_out: bool | str = False, ray_address: str | None = None) -> bool:
    """Every check at once, each bounded in time, so the doctor never hangs on one of them.
    `json_out`: True, or the output format (table, markdown, json; ahe.tables)."""
    from ahe.tables import TableOutput

    out = TableOutput(json_out)
    json_out = out.fmt == "json"
    from ahe.rollout.ray_doctor import ray_checks

    plan = [
        bounded("python", lambda: [_python()], CHECK_LIMIT_SEC),
        bounded("bubblewrap (local sandbox)", lambda: [_bwrap()], CHECK_LIMIT_SEC),
        bounded("docker engine (docker sandbox)", _docker_checks, CHECK_LIMIT_SEC, "docker info  (is the engine wedged?)"),
        bounded("git identity", lambda: [_git()], CHECK_LIMIT_SEC),
        bounded("model endpoint", lambda: [_endpoint()], CHECK_LIMIT_SEC, "check OPENAI_BASE_URL and the network"),
        bounded("ray", lambda: ray_checks(ray_address, Check), RAY_LIMIT_SEC, "ray status  (on the head)"),
    ]
    with ThreadPoolExecutor(len(plan)) as pool:  # the waits run side by side; each waits for its own check
        checks = [c for found in pool.map(lambda wait: wait(), plan) for c in found]
    ok = all(c.ok for c in checks if c.required)
    if json_out:
        print(json.dumps({"ok": ok, "checks": [asdict(c) for c in checks]}, indent=2))
        return ok
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title="ahe doctor")
    for col in ("check", "status", "detail", "fix"):
        table.add_column(col, overflow="fold")
    for c in checks:
        status = Text("ok", "green") if c.ok else (Text("missing", "red") if c.required else Text("optional", "yellow"))
        table.add_row(Text(c.name), status, Text(c.detail), Text(c.fix))  # Text: a fix's [brackets] are not markup
    out.print(table)
    for c in checks:  # what stands in the way, as a sentence too (the table may be folded or scrolled away)
        if c.required and not c.ok:
            Console(stderr=True, soft_wrap=True).print(Text(f"not ready: {c.name}: {c.detail}" + (f" (fix: {c.fix})" if c.fix else "")))
    return ok
