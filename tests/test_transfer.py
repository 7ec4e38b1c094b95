"""`ahe transfer`: a frozen harness (memory holding a lesson) vs the seed, on two scripted "models".

One MOCK policy acts as two models through `match.model` globs, with known behaviour that
depends on the harness: the harness carries the lesson LESSON in LongTermMEMORY.md
(injected in the system prompt), the seed does not.

- strong*: solves alpha and beta always, gamma only with the lesson, delta never
  → baseline 2/4, harness 3/4, delta +25 points
- weak*: solves alpha only with the lesson, beta and gamma only without it, delta never
  → baseline 2/4, harness 1/4, delta −25 points
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest
import yaml

from ahe.errors import AheError
from ahe.report.transfer import paired_bootstrap, resolve_harness, transfer_command
from tests.conftest import SEED
from tests.test_rollout import make_tasks

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

LESSON = "LESSON: write exactly the word asked for"
WORDS = ("alpha", "beta", "gamma", "delta")


def _solve(w: str, model: str, **cond) -> dict:
    return {"name": f"{model} {w}", "match": {"model": model, "turn": 1, "first_user_contains": f"word {w} ", **cond},
            "tool_calls": [{"name": "run_shell_command", "arguments": {"command": f"echo {w} > /app/answer.txt"}}]}


def policy() -> dict:
    return {
        "name": "transfer test (scripted MOCK, two models)",
        "rules": [
            _solve("alpha", "strong*"),
            _solve("beta", "strong*"),
            _solve("gamma", "strong*", system_contains=LESSON),
            _solve("alpha", "weak*", system_contains=LESSON),
            _solve("beta", "weak*", system_not_contains=LESSON),
            _solve("gamma", "weak*", system_not_contains=LESSON),
            {"name": "finish", "reply": "done"},
        ],
    }


def make_run(root: Path) -> Path:
    """A run-like folder: workspace/ git repo with iter-000 (seed) and iter-001 = best (seed + lesson)."""
    ws = root / "workspace"
    shutil.copytree(SEED, ws)
    repo = git.Repo.init(ws)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "test").set_value("user", "email", "t@localhost")
    repo.git.add(A=True)
    repo.index.commit("seed")
    repo.create_tag("iter-000")
    (ws / "LongTermMEMORY.md").write_text(f"- {LESSON}\n")
    repo.git.add(A=True)
    repo.index.commit("chg-1 lesson")
    repo.create_tag("iter-001")
    repo.create_tag("best")
    return root


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("transfer")
    tasks = make_tasks(d / "tasks", words=WORDS)
    pol = d / "policy.yaml"
    pol.write_text(yaml.safe_dump(policy(), sort_keys=False))
    run = make_run(d / "run")
    return d, tasks, pol, run


def test_ref_syntax(setup, tmp_path):
    _, _, _, run = setup
    seed = resolve_harness("seed", tmp_path, "b")
    assert Path(seed["path"]) == SEED and seed["commit"] is None
    best = resolve_harness(str(run), tmp_path, "h")  # RUN_DIR = RUN_DIR@best
    assert LESSON in (Path(best["path"]) / "LongTermMEMORY.md").read_text()
    assert best["commit"] == git.Repo(run / "workspace").commit("best").hexsha
    it0 = resolve_harness(f"{run}@0", tmp_path, "h")  # iteration number → iter-000
    assert LESSON not in (Path(it0["path"]) / "LongTermMEMORY.md").read_text()
    assert resolve_harness(f"{run}@{best['commit'][:8]}", tmp_path, "h")["commit"] == best["commit"]
    folder = resolve_harness(best["path"], tmp_path, "h")
    assert folder["kind"] == "folder" and folder["path"] == best["path"]
    with pytest.raises(AheError, match="no tag, branch or commit"):
        resolve_harness(f"{run}@iter-009", tmp_path, "h")
    with pytest.raises(AheError, match="not a harness folder"):
        resolve_harness(str(tmp_path / "nowhere"), tmp_path, "h")


def test_bootstrap_is_deterministic_and_sane():
    d = [0.0, 0.0, 100.0, 0.0]
    lo, hi = paired_bootstrap(d)
    assert (lo, hi) == paired_bootstrap(d) and lo <= 25 <= hi and lo >= 0 and hi <= 100
    assert paired_bootstrap([10.0] * 5) == (10.0, 10.0)
    assert paired_bootstrap([]) == (None, None)


def test_two_models_known_deltas(setup, capsys):
    d, tasks, pol, run = setup
    out = d / "out"
    code = transfer_command(harness=f"{run}@best", baseline=None, models="strong-1,weak-1", tasks=[tasks], k=2,
                            concurrency=4, out=out, base_url=None, mock_policy=pol, json_out=True)
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data == json.loads((out / "transfer.json").read_text())
    rows = {r["model"]: r for r in data["rows"]}
    s, w = rows["strong-1"], rows["weak-1"]
    assert (s["pass_at_1_harness"], s["pass_at_1_baseline"]) == (0.75, 0.5)
    assert (w["pass_at_1_harness"], w["pass_at_1_baseline"]) == (0.25, 0.5)
    assert s["delta_points"] == pytest.approx(25.0) and w["delta_points"] == pytest.approx(-25.0)
    assert s["ci95_low"] <= 25 <= s["ci95_high"] and w["ci95_low"] <= -25 <= w["ci95_high"]
    assert s["per_task"]["gamma"] == {"harness": 1.0, "baseline": 0.0, "delta_points": 100.0}
    assert s["paired_tasks"] == 4 and s["trials_harness"] == 8
    for r in (s, w):
        for side in ("harness", "baseline"):
            tok = r[f"tokens_per_trial_{side}"]
            assert tok > 0
            assert r[f"successes_per_mtok_{side}"] == pytest.approx(r[f"pass_at_1_{side}"] * 1e6 / tok)
        assert (Path(r["out_harness"]) / "results.json").is_file()
    assert data["harness"]["commit"] == git.Repo(run / "workspace").commit("best").hexsha
    assert Path(data["baseline"]["path"]) == SEED

    # resumable: the same command on the same --out runs no trial again, and prints the table
    before = {p: p.stat().st_mtime_ns for p in out.glob("evals/*/*/*/rollouts/*/*/result.json")}
    assert len(before) == 2 * 2 * 4 * 2
    proc = subprocess.run(
        [sys.executable, "-c", ("import sys; from ahe.report.transfer import transfer_command; "
         "sys.exit(transfer_command(sys.argv[1], None, sys.argv[2], [sys.argv[3]], 2, 4, sys.argv[4], None, sys.argv[5], False))"),
         f"{run}@best", "strong-1,weak-1", str(tasks), str(out), str(pol)],
        capture_output=True, text=True, timeout=300, check=False, env={**os.environ, "COLUMNS": "200"}, cwd=Path(__file__).resolve().parents[1],
    )
    assert proc.returncode == 0, proc.stderr
    assert before == {p: p.stat().st_mtime_ns for p in out.glob("evals/*/*/*/rollouts/*/*/result.json")}
    table = proc.stdout
    line = {m: next(ln for ln in table.splitlines() if m in ln) for m in ("strong-1", "weak-1")}
    assert "+25.0" in line["strong-1"] and "0.750" in line["strong-1"] and "0.500" in line["strong-1"]
    assert "-25.0" in line["weak-1"] and "0.250" in line["weak-1"]
    ci = lambda r: f"[{r['ci95_low']:+.1f}, {r['ci95_high']:+.1f}]"
    assert ci(s) in line["strong-1"] and ci(w) in line["weak-1"]


def test_models_file_two_endpoints_per_difficulty_no_traceback(setup, tmp_path):
    """Two scripted servers on two ports, one per model, named in a models file; run as a user would."""
    from ahe.testing import MockLLMServer, Policy

    d, tasks, _, run = setup
    hard = tmp_path / "tasks"
    shutil.copytree(tasks, hard)
    for w in ("gamma", "delta"):
        toml = hard / w / "task.toml"
        toml.write_text(toml.read_text().replace('difficulty = "easy"', 'difficulty = "hard"'))
    rules = policy()["rules"]
    servers = {m: MockLLMServer(Policy.from_dict({"name": f"{m} (MOCK)", "rules": [
        {**r, "match": {k: v for k, v in r["match"].items() if k != "model"}} for r in rules if r.get("match", {}).get("model") == f"{m}*"
    ] + [{"name": "finish", "reply": "done"}]})) for m in ("strong", "weak")}
    urls = {m: s.start() for m, s in servers.items()}
    try:
        assert urls["strong"] != urls["weak"]
        models = tmp_path / "models.yaml"
        models.write_text(yaml.safe_dump({"models": [
            {"name": "strong-1", "model": "vendor/strong", "base_url": urls["strong"], "api_key_env": "STRONG_KEY",
             "params": {"reasoning_effort": "high"}},
            {"name": "weak-1", "base_url": urls["weak"]},
        ]}, sort_keys=False))
        cmd = [sys.executable, "-m", "ahe.cli", "transfer", "--harness", f"{run}@best", "--models", str(models),
               "--tasks", str(hard), "-k", "2", "--out", str(tmp_path / "out")]
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "STRONG_KEY")}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=Path(__file__).resolve().parents[1])
        assert proc.returncode == 2 and "STRONG_KEY" in proc.stderr and "Traceback" not in proc.stderr
        proc = subprocess.run(cmd + ["--json"], capture_output=True, text=True, timeout=300,
                              env={**env, "STRONG_KEY": "sk-test"}, cwd=Path(__file__).resolve().parents[1])
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr and "Event loop is closed" not in proc.stderr, proc.stderr
        rows = {r["model"]: r for r in json.loads(proc.stdout)["rows"]}
        s, w = rows["strong-1"], rows["weak-1"]
        assert (s["delta_points"], w["delta_points"]) == (pytest.approx(25.0), pytest.approx(-25.0))
        assert s["model_sent"] == "vendor/strong" and s["base_url"] == urls["strong"] and w["base_url"] == urls["weak"]
        # per difficulty: gamma (hard) is the lesson's task for strong; alpha (easy) for weak
        assert s["by_difficulty"]["hard"]["pass_at_1_harness"] == 0.5 and s["by_difficulty"]["hard"]["pass_at_1_baseline"] == 0.0
        assert s["by_difficulty"]["easy"]["delta_points"] == pytest.approx(0.0)
        assert w["by_difficulty"]["easy"]["delta_points"] == pytest.approx(0.0)  # alpha +100, beta −100
        assert w["by_difficulty"]["hard"]["delta_points"] == pytest.approx(-50.0)  # gamma −100, delta 0
        for r in (s, w):
            for side in ("harness", "baseline"):
                assert r[f"successes_per_mtok_{side}"] == pytest.approx(
                    r[f"pass_at_1_{side}"] * 1e6 / r[f"tokens_per_trial_{side}"])
        strong_bodies, weak_bodies = servers["strong"].requests, servers["weak"].requests
        assert strong_bodies and weak_bodies
        assert {b["model"] for b in strong_bodies} == {"vendor/strong"} and {b["model"] for b in weak_bodies} == {"weak-1"}
        assert all(b.get("reasoning_effort") == "high" for b in strong_bodies)
        assert not any("reasoning_effort" in b for b in weak_bodies)
    finally:
        for srv in servers.values():
            srv.stop()


def test_models_file_errors_are_one_sentence(tmp_path):
    from ahe.report.transfer_models import load_models_file

    bad = tmp_path / "m.yaml"
    bad.write_text("models:\n  - name: a\n    params: {model: x}\n")
    with pytest.raises(AheError, match=r"m.yaml: key 'models.0.params'.*may not set model"):
        load_models_file(bad)
    bad.write_text("- {name: a}\n- {name: a, bse_url: x}\n")
    with pytest.raises(AheError, match="unknown key 'models.1.bse_url'"):
        load_models_file(bad)
    bad.write_text("- {name: a}\n- {name: a}\n")
    with pytest.raises(AheError, match="repeated: a"):
        load_models_file(bad)
