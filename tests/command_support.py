"""`ahe evolve` with the `command` backend, offline: the demo's scenario on a command-line agent.

The seed harness is the scripted CLI agent of tests/fixtures/command_agent/harness (its AGENTS.md
is the system prompt); the code agent's mock is the demo's (it solves word-frequency-top only when
the system prompt holds the lesson "byte for byte", fix-service-config always, fix-backup-script
never). The evolve agent's mock, in iteration 1, appends the lesson to AGENTS.md (predicting X)
and makes the CLI refuse commands that overwrite files under config/ (predicting Z): the first is
kept; the second fixes nothing and breaks Y, so it is rolled back.
`write_command_demo(folder)` writes the experiment; `evolve_command(config, ...)` runs it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from ahe.demo import LESSON, X, Y, Z, agent_policy, write_demo

HARNESS = Path(__file__).resolve().parent / "fixtures" / "command_agent" / "harness"
RUN = '            p = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)\n'
STRICT = ('            if "> config/" in command:  # strict mode: configuration files are not the agent\'s\n'
          '                p = subprocess.CompletedProcess(command, 1, "", "strict mode: do not overwrite config files\\n")\n'
          '            else:\n    ' + RUN)


def command_evolve_policy(agents_md: str) -> dict:
    def change(component: str, files: list[str], summary: str, task: str) -> dict:
        return {"component": component, "kind": "new", "files": files, "summary": summary,
                "failure_evidence": [{"task": task, "ref": f"corpus/{task}/trial-1/index.md", "note": "failed"}],
                "root_cause": "the agent stops without checking its work against the instruction",
                "targeted_fix": summary, "why_this_component": f"the CLI reads its {component} at start",
                "predicted_fixes": [task], "predicted_regressions": []}

    steps = [
        ("write_file", {"path": "AGENTS.md", "content": agents_md + LESSON}),
        ("record_change", change("system_prompt", ["AGENTS.md"], "AGENTS.md: compare the output byte for byte", X)),
        ("edit_file", {"path": "cli_agent.py", "old_string": RUN, "new_string": STRICT}),
        ("record_change", change("tool_implementation", ["cli_agent.py"],
                                 "the CLI refuses commands that overwrite files under config/", Z)),
        ("finish", {"message": "Added the lesson to AGENTS.md and a strict mode to the CLI."}),
    ]
    return {"name": "command-backend evolve agent (scripted MOCK)",
            "rules": [{"match": {"first_user_contains": "Iteration 1.", "turn": i},
                       "tool_calls": [{"name": name, "arguments": args}]} for i, (name, args) in enumerate(steps, 1)],
            "default": {"tool_calls": [{"name": "finish", "arguments": {"message": "No further changes."}}]}}


def write_command_demo(directory: Path, *, iterations: int = 3, k: int = 2) -> Path:
    """The demo experiment on the command backend; returns its config path."""
    config = write_demo(directory, iterations=iterations, k=k)
    seed = directory / "seed_workspace"
    shutil.copytree(HARNESS, seed)
    header = "# A scripted MOCK model — no real model is involved.\n"
    (directory / "policies" / "agent.yaml").write_text(header + yaml.safe_dump(agent_policy(), sort_keys=False, width=200))
    evolve = command_evolve_policy((seed / "AGENTS.md").read_text())
    (directory / "policies" / "evolve.yaml").write_text(header + yaml.safe_dump(evolve, sort_keys=False, width=200))
    data = yaml.safe_load(config.read_text())
    data["seed_workspace"] = str(seed)
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    return config



def command_run(tmp_path_factory) -> Path:
    """The command-backend scenario's run folder, built once a session for every worker
    (tests/shared_runs.py); read only."""
    from tests.shared_runs import shared_build

    return shared_build(tmp_path_factory, "command-scenario", command_run_dir) / "run"


def command_run_dir(base: Path) -> Path:
    """`ahe evolve` of the command-backend scenario under `base` (made once; reused when finished)."""
    import json
    import subprocess
    import sys

    run = base / "run"
    state = run / "loop_state.json"
    if not state.exists() or not json.loads(state.read_text()).get("finished"):
        shutil.rmtree(base, ignore_errors=True)
        config = write_command_demo(base)
        proc = subprocess.run([sys.executable, "-m", "ahe.cli", "evolve", str(config), "--run-dir", str(run), "-q"],
                              capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr
    return run



PYTHON_IMAGE = "ahe-offline-python:1"
_STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data", "site-packages",
                "dist-packages", "__pycache__", "config-3.11-x86_64-linux-gnu"}


def build_python_image(client, tag: str = PYTHON_IMAGE) -> str:
    """The offline busybox+bash base plus this machine's /usr/bin/python3 (standard library only):
    the docker sandbox's tests need a python3 for the gateway's forwarder and the scripted CLI."""
    import io
    import os
    import sys
    import tarfile

    from ahe.sandbox.docker_images import _shared_libraries, image_exists, image_lock, offline_rootfs_tar

    if image_exists(client, tag):
        return tag
    if not os.path.exists("/usr/bin/python3"):
        import pytest

        pytest.skip("no /usr/bin/python3 on this machine to put into the docker test image")
    with image_lock(tag):
        if image_exists(client, tag):
            return tag
        python = os.path.realpath("/usr/bin/python3")
        version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
        stdlib = Path("/usr/lib") / version
        buffer = io.BytesIO(offline_rootfs_tar())
        with tarfile.open(fileobj=buffer, mode="a") as tar:
            names = set(tar.getnames())
            libs = set(_shared_libraries(python))
            tar.add(python, arcname="usr/bin/" + Path(python).name)
            for src in sorted(stdlib.rglob("*")):
                rel = src.relative_to(stdlib)
                if rel.parts[0] in _STDLIB_SKIP or "__pycache__" in rel.parts or not src.is_file():
                    continue
                tar.add(src, arcname=f"usr/lib/{version}/{rel}", recursive=False)
                if src.suffix == ".so":
                    libs.update(_shared_libraries(str(src)))
            for lib in sorted(libs):
                if lib.lstrip("/") not in names:
                    tar.add(os.path.realpath(lib), arcname=lib.lstrip("/"))
            link = tarfile.TarInfo("usr/bin/python3")
            link.type, link.linkname = tarfile.SYMTYPE, Path(python).name
            tar.addfile(link)
        repository, _, version_tag = tag.rpartition(":")
        client.api.import_image_from_data(buffer.getvalue(), repository=repository, tag=version_tag,
                                          changes=["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                                   'CMD ["/bin/sh"]'])
    return tag


__all__ = ["build_python_image", "command_run_dir", "write_command_demo", "X", "Y", "Z"]
