"""The SWE-CI verifier, run inside the sandbox after the agent (standard library only).

It copies /app aside, puts the pristine target tests (tests/target_tests/, never visible to
the agent) over whatever test folders the agent left, runs them with runner.py and writes:

* /logs/verifier/test_results.json  every test's status (the CI loop reads it each round)
* /logs/verifier/reward.json        reward = a(c), normalized_change, evoscore,
                                     zero_regression, rounds, n_pass, n_base, n_target

Single-shot grading is one round: c_1 is the agent's codebase and round 0 the base c_0.
`--count OUT` only writes the statuses (the task maker uses it on the base and the target).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from metrics import evoscore, n_pass, normalized_change, regressions, zero_regression  # noqa: E402
from runner import run_tests  # noqa: E402

IGNORE = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache")


def statuses_of(app: Path, config: dict) -> dict:
    """Run the pristine target tests against a copy of the codebase at `app`."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "repo"
        shutil.copytree(app, work, symlinks=True, ignore=IGNORE)
        for folder in config["test_dirs"]:
            shutil.rmtree(work / folder, ignore_errors=True)
            if (work / folder).exists():
                (work / folder).unlink()
            pristine = HERE / "target_tests" / folder
            if pristine.is_dir():
                shutil.copytree(pristine, work / folder, symlinks=True)
            elif pristine.is_file():  # a single test file
                shutil.copy2(pristine, work / folder)
        return run_tests(work, config["test_dirs"], config.get("command"), config.get("timeout_sec", 1800))


def reward_of(statuses: dict, expected: dict) -> dict:
    """The reward.json of one codebase graded against the base (one round)."""
    n = n_pass(statuses, expected["target_tests"])
    a = normalized_change(n, expected["n_base"], expected["n_target"])
    base = {t: "passed" for t in expected["base_passing"]}
    regressed = regressions(base, statuses)
    return {
        "reward": a, "normalized_change": a, "evoscore": evoscore([a], expected.get("gamma", 1.0)),
        "zero_regression": zero_regression([regressed]), "rounds": 1, "n_pass": n,
        "n_base": expected["n_base"], "n_target": expected["n_target"], "regressions": len(regressed),
        "evoscore_gamma_1": a, "solved": 1.0 if a >= 1.0 else 0.0, "gamma": expected.get("gamma", 1.0),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="SWE-CI verifier")
    ap.add_argument("--app", type=Path, default=Path("/app"))
    ap.add_argument("--logs", type=Path, default=Path("/logs/verifier"))
    ap.add_argument("--count", type=Path, default=None, help="only write the test statuses here")
    args = ap.parse_args(argv)
    config = json.loads((HERE / "config.json").read_text())
    result = statuses_of(args.app, config)
    if args.count is not None:
        args.count.write_text(json.dumps(result, sort_keys=True))
        return 0
    args.logs.mkdir(parents=True, exist_ok=True)
    (args.logs / "test_results.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    expected = json.loads((HERE / "expected.json").read_text())
    reward = reward_of(result["tests"], expected)
    (args.logs / "reward.json").write_text(json.dumps(reward, indent=1))
    print(json.dumps(reward))
    return 0


if __name__ == "__main__":
    sys.exit(main())
