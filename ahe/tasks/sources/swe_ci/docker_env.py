"""The test environment of a docker task: a Dockerfile generated into the task.

    environment/Dockerfile          FROM <base image>; the environment; then the code at /app
    environment/ahe-env/            requirements.txt (the exact versions), wheels/, install.py

The environment layers come first and are the same for every task of a repository (same
base image, same wheels), so Docker builds them once and every later task of that repository
reuses them from its build cache; only the code layer differs. The wheels are downloaded once
per environment (kept in its folder) from pip's configured index; the build itself needs no
network and no pip in the image: `install.py` (standard library) lays out a virtualenv at
/opt/ahe-env by hand and unpacks the wheels into it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ahe.errors import AheError

DEFAULT_BASE_IMAGE = "python:3.11-slim"

INSTALL_PY = '''"""Lay out a virtualenv at DEST from this interpreter and unpack the wheels into it."""
import os, shutil, sys, sysconfig, zipfile
dest, here = sys.argv[1], os.path.dirname(os.path.abspath(__file__))
ver = "python%d.%d" % sys.version_info[:2]
site = os.path.join(dest, "lib", ver, "site-packages")
os.makedirs(site, exist_ok=True)
os.makedirs(os.path.join(dest, "bin"), exist_ok=True)
exe = os.path.realpath(sys.executable)
for name in ("python", "python3", ver):
    link = os.path.join(dest, "bin", name)
    if not os.path.lexists(link):
        os.symlink(exe, link)
with open(os.path.join(dest, "pyvenv.cfg"), "w") as f:
    f.write("home = %s\\ninclude-system-site-packages = false\\nversion = %s\\n"
            % (os.path.dirname(exe), sysconfig.get_python_version()))
wheels = os.path.join(here, "wheels")
for whl in sorted(os.listdir(wheels)) if os.path.isdir(wheels) else []:
    with zipfile.ZipFile(os.path.join(wheels, whl)) as z:
        z.extractall(site)
    for entry in os.listdir(site):  # NAME.data/{purelib,platlib} belong in site-packages
        data = os.path.join(site, entry)
        if entry.endswith(".data") and os.path.isdir(data):
            for sub in ("purelib", "platlib"):
                if os.path.isdir(os.path.join(data, sub)):
                    shutil.copytree(os.path.join(data, sub), site, dirs_exist_ok=True)
            shutil.rmtree(data)
print("test environment at %s: %d wheel(s)" % (dest, len(os.listdir(wheels)) if os.path.isdir(wheels) else 0))
'''


def dockerfile(base_image: str, setup: str | None) -> str:
    lines = [f"FROM {base_image}", "# the repository's test environment (the same layers for all its tasks)",
             "COPY ahe-env/ /tmp/ahe-env/",
             "RUN python3 /tmp/ahe-env/install.py /opt/ahe-env && rm -rf /tmp/ahe-env"]
    if setup:
        lines.append(f"RUN cd /opt/ahe-env && PATH=/opt/ahe-env/bin:$PATH bash -c {_quote(setup)}")
    lines += ["# the task's code", "COPY app/ /app/", "WORKDIR /app"]
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def wheels_of(env) -> Path:
    """The environment's wheels, downloaded once into its folder (pip's configured index)."""
    folder = Path(env.path) / "wheels"
    done = folder / ".complete"
    if done.is_file():
        return folder
    pins = [p for p in env.frozen if "==" in p]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    if pins:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                               "--no-deps", "--only-binary", ":all:", "-d", str(folder), *pins],
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            tail = " ".join(proc.stderr.strip().splitlines()[-2:])[-400:]
            raise AheError(f"downloading the wheels of the test environment ({', '.join(pins)}) failed: {tail}")
    done.write_text("")
    return folder


def write_env_context(environment_dir: Path, env, base_image: str) -> None:
    """environment/ahe-env/ (requirements, wheels, install.py) beside the generated Dockerfile."""
    ctx = environment_dir / "ahe-env"
    ctx.mkdir(parents=True, exist_ok=True)
    (ctx / "requirements.txt").write_text("".join(f"{p}\n" for p in env.frozen))
    (ctx / "install.py").write_text(INSTALL_PY)
    shutil.copytree(wheels_of(env), ctx / "wheels", ignore=shutil.ignore_patterns(".complete"))
    (environment_dir / "Dockerfile").write_text(dockerfile(base_image, env.setup))
