"""`ahe plan`: the forecast before a run (issue 37) — counts by the loop's rules, speed, prices, budgets."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from ahe.config import ExperimentConfig
from ahe.evolution.forecast import count_trials
from ahe.evolution.plan_command import plan_forecast

AHE = str(Path(sys.executable).parent / "ahe")


def _tasks(root: Path, n: int) -> Path:
    for i in range(n):
        d = root / f"task-{i:03d}"
        d.mkdir(parents=True)
        (d / "task.toml").write_text(f'[task]\nname = "task-{i:03d}"\n')
        (d / "instruction.md").write_text("Write hello to out.txt.\n")
    return root


def _init(tmp_path: Path, n: int) -> Path:
    tasks = _tasks(tmp_path / "tasks", n)
    out = subprocess.run([AHE, "init", str(tmp_path / "exp"), "--tasks", str(tasks)], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def test_plan_89_tasks_k2_ten_iterations_is_fast(tmp_path):
    config = _init(tmp_path, 89)
    cfg = yaml.safe_load(config.read_text())
    # line: the measured winner among the shipped strategies (docs/search.md: the product's tree at equal budget gets ~half)
    assert (cfg["k"], cfg["iterations"], cfg["search"]) == (2, 10, "line") and "tree" not in cfg
    t0 = time.monotonic()
    out = subprocess.run([AHE, "plan", str(config)], capture_output=True, text=True)
    took = time.monotonic() - t0
    assert out.returncode == 0, out.stderr
    assert took < 4.0  # < 2 s on an idle machine (docs/benchmarks.md); margin for a shared one
    text = out.stdout
    assert "= 1958 rollout (89 tasks × k=2 × 11)" in text  # 89 × 2 × 11 rollouts (10 iterations + the final one) ...
    assert "re-evaluation" in text  # ... plus expected-value's re-evaluation range
    assert "child" not in text  # a line makes no tree children
    assert "no price" in text and "wall clock:" in text and "total tokens:" in text
    js = json.loads(subprocess.run([AHE, "plan", str(config), "--json"], capture_output=True, text=True, check=True).stdout)
    assert js["trials"]["rollout"] == 1958 and js["trials"]["reeval"]["high"] == 10 * 178  # ceiling 2 × share 0.5
    assert {r["role"] for r in js["roles"]} >= {"agent", "reeval", "debugger", "evolve"}
    assert all(r["cost_usd"] is None and r["price"] == "no price" for r in js["roles"])


def test_counts_follow_the_loop_rules(tmp_path):
    tasks = _tasks(tmp_path / "t", 5)
    base = dict(tasks=tasks, k=3, iterations=4)
    paper = ExperimentConfig(**base, attribution={"strictness": "paper"})
    c = count_trials(paper, 5)
    assert (c.rounds, c.rollout, c.variants, c.reeval.high, c.total.mid) == (5, 75, 0, 0, 75)
    noise = ExperimentConfig(**base, attribution={"strictness": "noise", "reeval_share": 0.5}, evaluate_final=False, variants=2)
    c = count_trials(noise, 5)
    # 4 rollouts, variants in every iteration (2 × 15 each), re-evaluation in iterations 2..4 (int(0.5 × 15) each)
    assert (c.rounds, c.rollout, c.variants, c.reeval.high) == (4, 60, 120, 21)


def test_prices_file_and_unpriced_model(tmp_path):
    config = _init(tmp_path, 3)
    cfg = yaml.safe_load(config.read_text())
    cfg["models"] = {"agent": {"model": "m-a"}, "debugger": {"model": "m-d"}, "evolve": {"model": "m-e"}}
    config.write_text(yaml.safe_dump(cfg))
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({"m-a": {"input": 1.0, "output": 4.0, "cached_input": 0.1}}))
    from ahe.config import load_experiment_config

    fc = plan_forecast(load_experiment_config(config), prices_file=prices)
    by = {r.role: r for r in fc.roles}
    assert by["agent"].cost_usd is not None and by["agent"].cost_usd.mid > 0
    assert by["evolve"].cost_usd is None and by["evolve"].price == "no price"
    assert "evolve" in fc.unpriced_roles and fc.cost_usd.mid == by["agent"].cost_usd.mid + by["reeval"].cost_usd.mid


def test_a_budget_too_small_is_told_and_the_run_ends_inside_it(tmp_path):
    from ahe.demo import write_demo
    from ahe.evolution.commands import evolve_command
    from ahe.config import load_experiment_config
    from ahe.run_folder import RunFolder

    config = write_demo(tmp_path / "demo", iterations=3)
    cfg = yaml.safe_load(config.read_text())
    cfg["budgets"] = {"max_tokens": {"total": 60000}}
    config.write_text(yaml.safe_dump(cfg))
    fc = plan_forecast(load_experiment_config(config))
    assert fc.budget.stops and fc.budget.iteration is not None and fc.budget.iteration <= 3
    told = subprocess.run([AHE, "plan", str(config)], capture_output=True, text=True)  # what the user reads
    assert told.returncode == 0, told.stderr
    assert f"token budget of total (60,000) is reached in iteration {fc.budget.iteration}" in told.stdout
    run = evolve_command(config, resume=None, run_dir=tmp_path / "run", overrides={}, quiet=True)
    folder = RunFolder(run)
    scores, state = folder.load_scores(), folder.load_state()
    assert "round boundary" in (state.stopped or "")
    assert scores.totals()["tokens"]["total"] < 60000  # inside the budget, not past it
    assert scores.best_iteration is not None and scores.best_pass_at_1 is not None  # a judged best
    # planning from this run says the full config would not fit either
    again = plan_forecast(load_experiment_config(config), source_run=run)
    assert again.budget.stops and again.source == "run"


def test_pilot_runs_the_trials_and_says_so(tmp_path):
    from ahe.demo import write_demo

    config = write_demo(tmp_path / "demo", iterations=2)
    out = subprocess.run([AHE, "plan", str(config), "--pilot", "3"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "ran a pilot of 3 trials" in out.stdout and "no price" in out.stdout
    assert "unit costs from pilot" in out.stdout
    assert not (tmp_path / "demo" / "run").exists()  # a pilot is not a run


def test_bad_input_is_one_sentence(tmp_path):
    config = _init(tmp_path, 2)
    bad = tmp_path / "p.yaml"
    bad.write_text("m: {input: abc}\n")
    for args, says in (([f"--prices={bad}"], "m.input"), (["--from", str(tmp_path)], "no scores.json"),
                       (["--from", str(tmp_path / "nope")], "not a folder")):
        out = subprocess.run([AHE, "plan", str(config), *args], capture_output=True, text=True)
        assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr


def test_evolve_plan_plans_and_does_not_run(tmp_path):
    config = _init(tmp_path, 4)
    out = subprocess.run([AHE, "evolve", str(config), "--plan", "-k", "3"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "= 132 rollout (4 tasks × k=3 × 11)" in out.stdout
    assert not (tmp_path / "runs").exists()


def test_evolve_takes_prices_and_a_pilot_like_plan_and_bills_the_run_with_the_prices(tmp_path):
    from ahe.demo import write_demo
    from ahe.run_folder import RunFolder

    config = write_demo(tmp_path / "demo", iterations=1)
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({"mock-agent": {"input": 2.0, "output": 8.0, "cached_input": 0.5}}))
    planned = subprocess.run([AHE, "evolve", str(config), "--plan", "--prices", str(prices), "--pilot", "2"],
                             capture_output=True, text=True, cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert "ran a pilot of 2 trials" in planned.stdout and "unit costs from pilot" in planned.stdout
    pilot_line = next(line for line in planned.stdout.splitlines() if "ran a pilot" in line)
    assert "$" in pilot_line and "no price" not in pilot_line  # the pilot's own trials priced by the file too
    agent_row = next(line for line in planned.stdout.splitlines() if "mock-agent" in line)
    assert "$" in agent_row and "no price" not in agent_row  # priced by the file
    assert not (tmp_path / "demo" / "run").exists()

    alone = subprocess.run([AHE, "evolve", str(config), "--pilot", "2"], capture_output=True, text=True, cwd=tmp_path)
    assert alone.returncode == 2 and "--pilot N goes with --plan" in alone.stderr and "Traceback" not in alone.stderr

    run = tmp_path / "run"
    done = subprocess.run([AHE, "evolve", str(config), "--run-dir", str(run), "--prices", str(prices), "-q"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cost = RunFolder(run).load_scores().totals()["cost_usd"]
    assert cost["agent"] > 0 and cost.get("evolve", 0) == 0  # only the priced model costs dollars
    saved = yaml.safe_load((run / "experiment.yaml").read_text())
    assert saved["models"]["agent"]["prices"]["mock-agent"]["input"] == 2.0  # a resume bills the same


def test_evolve_plan_json_is_the_plan_json_and_json_without_plan_is_refused(tmp_path):
    from ahe.demo import write_demo

    config = write_demo(tmp_path / "demo", iterations=1)  # the demo prices no model
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump({m: {"input": 2.0, "output": 8.0, "cached_input": 0.5} for m in ("mock-agent", "mock-debugger")}))
    planned = subprocess.run([AHE, "evolve", str(config), "--plan", "--prices", str(prices), "--pilot", "2", "--json"],
                             capture_output=True, text=True, cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    fc = json.loads(planned.stdout)  # the whole of stdout is the JSON: nothing printed before it
    by = {r["role"]: r for r in fc["roles"]}
    assert fc["source"] == "pilot" and fc["pilot_cost"]["trials"] == 2 and fc["pilot_cost"]["cost_usd"] > 0
    assert by["agent"]["cost_usd"]["mid"] > 0 and by["debugger"]["cost_usd"]["mid"] > 0
    assert by["evolve"]["cost_usd"] is None and "evolve" in fc["unpriced_roles"]
    same = json.loads(subprocess.run([AHE, "plan", str(config), "--json", "-k", "3"], capture_output=True, text=True, check=True).stdout)
    bare = json.loads(subprocess.run([AHE, "evolve", str(config), "--plan", "--json", "-k", "3"], capture_output=True, text=True,
                                     check=True, cwd=tmp_path).stdout)
    assert bare["cost_usd"] is None  # without --prices: nothing priced, never $0
    assert bare["trials"] == same["trials"] and bare["total_tokens"] == same["total_tokens"]  # evolve's overrides, plan's numbers
    alone = subprocess.run([AHE, "evolve", str(config), "--json"], capture_output=True, text=True, cwd=tmp_path)
    assert alone.returncode == 2 and "--json goes with --plan" in alone.stderr and "Traceback" not in alone.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "demo" / "runs").exists()
