"""The replay child's jail: foresight runs the change's hooks and tools, so it runs them confined.

`record_change` replays a change before the gate has judged it, so the change's middleware and
tools run here first. The child (`python -m evolve_agent.replay`'s code) runs in the same kind
of jail as a rollout's worker (ahe/confine/jail.py): the harness's git repository read-only,
copies of only what it reads — each recorded trial's trajectory.json and result.json, and the
tasks without their tests and solution (a stub tests/test.sh keeps them loadable) — a private
/tmp, no network, no home, no key, its own pid namespace. Without bwrap it runs as before.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

STUB_TEST = "#!/bin/bash\n# the replay never runs a verifier: the real tests are not copied\nexit 1\n"
_BOOT = "import sys;sys.path[:0]={paths!r};from evolve_agent.replay.run import _main;_main()"


def copy_round(iteration_dir: Path, dest: Path) -> None:
    """rollouts/<task>/<trial>/{trajectory.json,result.json} only: no verifier output, no /app."""
    root = Path(iteration_dir) / "rollouts"
    if not root.is_dir():
        return
    for traj in root.glob("*/*/trajectory.json"):
        trial = traj.parent
        out = dest / "rollouts" / trial.parent.name / trial.name
        out.mkdir(parents=True, exist_ok=True)
        for name in ("trajectory.json", "result.json"):
            src = trial / name
            if src.is_file() and not src.is_symlink():
                shutil.copyfile(src, out / name)


def copy_tasks(tasks_dir: Path, dest: Path) -> None:
    """Every task folder without tests/ and solution/ (a stub test.sh so the loader accepts it)."""
    from ahe.tasks.loader import task_folders

    for folder in task_folders(Path(tasks_dir)):
        out = dest / folder.name
        shutil.copytree(folder, out, symlinks=True,
                        ignore=lambda d, names: {"tests", "solution"} if Path(d) == folder else set())
        (out / "tests").mkdir()
        (out / "tests" / "test.sh").write_text(STUB_TEST)


def jailed_command(job: dict, tmp: Path) -> tuple[list[str], dict, dict[str, str]] | None:
    """(argv, the job as the child sees it, env) for the jailed child; None when bwrap does not work."""
    from ahe.confine.jail import jail_argv
    from ahe.sandbox import bwrap as bw

    ok, _ = bw.check()
    if not ok:
        return None
    binds = [(str(Path(job["repo"]).resolve()), "/harness")]
    round_copy = tmp / "round"
    round_copy.mkdir()
    copy_round(Path(job["iteration_dir"]), round_copy)
    binds.append((str(round_copy), "/round"))
    inner = dict(job, repo="/harness", iteration_dir="/round")
    if job.get("tasks_dir"):
        tasks_copy = tmp / "tasks"
        tasks_copy.mkdir()
        copy_tasks(Path(job["tasks_dir"]), tasks_copy)
        binds.append((str(tasks_copy), "/tasks"))
        inner["tasks_dir"] = "/tasks"
    argv, paths = jail_argv(bw.find_bwrap(), binds, packages=("ahe", "evolve_agent", "debugger"), hostname="ahe-replay",
                            tmpfs={"/tmp": 512 << 20})
    argv += [os.path.realpath(sys.executable), "-I", "-S", "-c", _BOOT.format(paths=paths)]
    user = os.environ.get("USER") or "user"
    env = {"PATH": bw.DEFAULT_PATH, "LANG": "C.UTF-8", "HOME": "/tmp", "TMPDIR": "/tmp", "USER": user,
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    return argv, inner, env
