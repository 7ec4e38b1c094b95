"""The search seam (issue 36, docs/search.md): `search:` names a strategy the evolve phase asks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ahe.config import AttributionSettings, DebuggerSettings, ExperimentConfig, load_experiment_config
from ahe.errors import AheError, ConfigError
from ahe.evolution.loop import EvolutionLoop
from ahe.evolution.registry import get_search, register_search, search_names
from ahe.evolution.search import Expansion
from ahe.llm.types import Usage
from ahe.simulate.evolve import ScriptedEvolve
from ahe.simulate.executor import SimulatedExecutor
from ahe.simulate.runner import write_tasks
from tests.test_simulate import _world


def _cfg(tmp: Path, text: str) -> Path:
    p = tmp / "experiment.yaml"
    p.write_text("tasks: tasks\n" + text)
    return p


def test_line_is_the_default_and_variants_alone_still_mean_best_of_n(tmp_path: Path) -> None:
    assert load_experiment_config(_cfg(tmp_path, "")).search == "line"
    cfg = load_experiment_config(_cfg(tmp_path, "variants: 3\n"))
    assert (cfg.search, get_search(cfg.search).children(cfg)) == ("best-of-n", 3)
    assert get_search("line").children(cfg) == 1
    assert {"line", "best-of-n"} <= set(search_names())


@pytest.mark.parametrize("text, words", [
    ("search: best-of-n\n", "search: best-of-n needs `variants: N` with N ≥ 2"),
    ("search: line\nvariants: 2\n", "search: line evolves one child per round, but variants is 2"),
])
def test_search_and_variants_that_disagree_are_one_sentence(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_experiment_config(_cfg(tmp_path, text))
    msg = str(err.value)
    assert words in msg and "got" not in msg and "Traceback" not in msg and msg.count("\n") == 0


def test_an_unknown_strategy_names_the_field_and_the_known_ones_before_anything_runs(tmp_path: Path) -> None:
    cfg = ExperimentConfig(tasks=write_tasks(tmp_path / "tasks", 2), search="beam")
    with pytest.raises(AheError) as err:
        EvolutionLoop(cfg, tmp_path / "run")
    assert str(err.value) == "search 'beam': no such search strategy; use one of: best-of-n, line, tree"
    assert not (tmp_path / "run").exists()


class _Scripted:
    """A registered strategy (as a plugin would): the simulator's scripted edits, counted."""

    name = "scripted-test"

    def __init__(self, world) -> None:
        self.world, self.calls = world, []

    def children(self, cfg: ExperimentConfig) -> int:
        return 1

    async def expand(self, ctx, it, prior) -> Expansion:
        self.calls.append((it, ctx.repo.head()))
        manifest = await ScriptedEvolve(self.world, gate=False)(repo=ctx.repo, iteration=it,
                                                                  out_dir=ctx.run.iteration(it).evolve, tasks_dir=ctx.tasks_dir)
        return Expansion(manifest=manifest, usage=Usage(prompt_tokens=100, completion_tokens=10))


def test_the_evolve_phase_asks_the_named_strategy_and_the_loop_judges_its_children(tmp_path: Path, monkeypatch) -> None:
    from ahe.evolution import registry

    world = _world()
    monkeypatch.setattr(registry, "_SEARCHES", dict(registry._SEARCHES))  # registered for this test only
    strategy = register_search(_Scripted(world))
    cfg = ExperimentConfig(tasks=write_tasks(tmp_path / "tasks", len(world.base)), iterations=2, k=2, concurrency=1,
                           retry_infra=0, search="scripted-test", attribution=AttributionSettings(strictness="paper"),
                           debugger=DebuggerSettings(enabled=False))
    loop = EvolutionLoop(cfg, tmp_path / "run", executor=SimulatedExecutor(world))
    repo = loop.prepare(resume=False)
    asyncio.run(loop.run_loop(repo, {}))
    assert [it for it, _ in strategy.calls] == [1, 2]
    assert strategy.calls[0][1] == repo.repo.git.rev_parse("iter-000")  # round 1 evolves from the seed
    att = json.loads((tmp_path / "run" / "iterations" / "002" / "attribution.json").read_text())
    assert [v["change_id"] for v in att["changes"]] == ["chg-1", "chg-2"]  # its manifest is judged like any other
    scores = json.loads((tmp_path / "run" / "scores.json").read_text())
    assert scores["iterations"][0]["tokens"]["evolve"] == 110  # its usage counts against the budgets
