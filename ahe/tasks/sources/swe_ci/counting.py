"""Count n(c0) and n(c*) of a freshly written task, in the sandbox the task will run in.

The base is what setup leaves in /app; the target is that after the oracle (solve.sh). Both
are graded by the task's own verifier script (`verify.py --count`), so the counts, the test
ids and the interpreter are exactly those of every later trial.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

from ahe.errors import AheError
from ahe.tasks.loader import load_task
from ahe.tasks.phases import TESTS_DIR, run_oracle, run_setup
from ahe.tempdirs import temp_dir


async def _statuses(task, factory, workdir: Path, *, oracle: bool) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    sandbox = factory(task, workdir)
    if inspect.isawaitable(sandbox):
        sandbox = await sandbox
    try:
        await sandbox.start()
        await run_setup(task, sandbox)
        if oracle:
            solve = await run_oracle(task, sandbox)
            if solve.exit_code != 0:
                raise AheError(f"{task.solve_script}: the reference solution failed (exit {solve.exit_code}): "
                               f"{(solve.stdout + solve.stderr)[-400:]}")
        await sandbox.exec(f"rm -rf {TESTS_DIR}", timeout=60)
        await sandbox.upload(task.tests_dir, TESTS_DIR)
        run = await sandbox.exec(f"bash {TESTS_DIR}/test.sh --count /tmp/ahe-counts.json",
                                 timeout=task.verifier_timeout_sec, cwd="/app")
        if run.exit_code != 0:
            raise AheError(f"{task.path}: running the tests on the {'target' if oracle else 'base'} failed "
                           f"(exit {run.exit_code}): {(run.stdout + run.stderr)[-600:]}")
        return json.loads(await sandbox.read_file("/tmp/ahe-counts.json"))
    finally:
        await sandbox.stop()


def _tally(run: dict) -> dict[str, int]:
    out: dict[str, int] = {}
    for status in run["tests"].values():
        out[status] = out.get(status, 0) + 1
    return out


def expected_counts(base: dict, target: dict, gamma: float = 1.0) -> dict:
    """expected.json: T (tests passing on the target), T ∩ pass(c0), n(c0), n(c*).

    Skipped and expected-to-fail tests are never in T: they count neither way."""
    target_tests = sorted(t for t, s in target["tests"].items() if s == "passed")
    base_passing = sorted(t for t in target_tests if base["tests"].get(t) == "passed")
    first_error = next(iter(target.get("messages", {}).values()), "") or next(iter(base.get("messages", {}).values()), "")
    return {"target_tests": target_tests, "base_passing": base_passing, "n_base": len(base_passing),
            "n_target": len(target_tests), "gap": len(target_tests) - len(base_passing),
            "gamma": gamma, "runner": target.get("runner"), "runner_note": target.get("runner_note", ""),
            "statuses_base": _tally(base), "statuses_target": _tally(target),
            "skipped_target": sum(1 for s in target["tests"].values() if s == "skipped"),
            "first_error": first_error[-300:]}


def no_tests_reason(expected: dict, test_dirs: list[str]) -> str | None:
    """One sentence with the likely cause when no test passed on either side (None otherwise)."""
    if expected["n_target"] or any(s == "passed" for s in [*expected["statuses_base"], *expected["statuses_target"]]):
        return None
    ran = expected["runner_note"] or expected["runner"]
    seen = expected["statuses_target"]
    if not seen:
        return (f"no test ran on the base or the target ({ran}): nothing was collected in {', '.join(test_dirs)}; "
                "name the test folders with --tests-dir or give --test-command.")
    if set(seen) == {"skipped"}:
        return f"no test ran on the base or the target ({ran}): all {seen['skipped']} tests were skipped."
    last = [ln for ln in expected.get("first_error", "").strip().splitlines() if ln.strip()][-1:] or ["?"]
    return (f"no test passed on the base or the target ({ran}): {sum(seen.values())} tests failed or errored, "
            f"e.g. `{last[0].strip()[:160]}`; a missing dependency is the likely cause: let AHE make the test "
            "environment from the project's declared dependencies, or pass --setup.")


async def count_task(task_dir: Path, sandbox: str = "local", isolation: str = "auto", gamma: float = 1.0,
                     client: object = None) -> dict:
    """Run the tests on base and target of the task at `task_dir`; return expected.json's content."""
    from ahe.tasks.sandboxes import factories_for

    task = load_task(task_dir)
    factory = factories_for(sandbox, isolation=isolation, client=client).get(task.runs_on)
    if factory is None:
        raise AheError(f"{task_dir}: this task needs --sandbox {task.runs_on} to be counted")
    with temp_dir("swe-ci-count") as tmp:
        base = await _statuses(task, factory, Path(tmp) / "base", oracle=False)
        target = await _statuses(task, factory, Path(tmp) / "target", oracle=True)
    return expected_counts(base, target, gamma)
