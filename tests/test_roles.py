"""The model roles (DESIGN §4): one list, and everything that enumerates roles follows it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ahe.config import load_experiment_config
from ahe.errors import ConfigError
from ahe.llm import ROLES, LLMSettings, RoleConfig, UsageLedger, make_client
from ahe.report.html import _usage
from ahe.report.html_svg import role_color
from ahe.run_folder import IterationScore, Scores
from ahe.testing import MockLLMServer

ROOT = Path(__file__).resolve().parent.parent


def test_every_role_of_the_design_is_a_role() -> None:
    assert {"agent", "debugger", "evolve", "generator", "reeval"} <= set(ROLES)
    assert len(set(ROLES)) == len(ROLES)


def test_docs_models_lists_exactly_the_roles() -> None:
    text = (ROOT / "docs" / "models.md").read_text()
    section = text.split("## Roles", 1)[1].split("| role | who calls |", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `([a-z]+)` \|", section, flags=re.M)
    assert listed == list(ROLES)


async def test_a_generator_call_is_counted_under_generator() -> None:
    srv = MockLLMServer({"rules": [{"reply": "a project"}]})
    srv.start()
    ledger = UsageLedger()
    client = make_client("generator", RoleConfig(model="mock-generator", base_url=srv.base_url), ledger, env={})
    try:
        resp = await client.complete([{"role": "user", "content": "propose a project"}], settings=LLMSettings())
    finally:
        await client.aclose()
        srv.stop()
    assert resp.content == "a project"
    snap = ledger.snapshot()
    assert list(snap) == ["generator"] and snap["generator"]["calls"] == 1


def test_an_unknown_role_is_refused_with_the_list() -> None:
    with pytest.raises(ConfigError, match="unknown model role 'generater'.*generator"):
        make_client("generater", RoleConfig(model="m"), env={})  # type: ignore[arg-type]


def test_usage_table_orders_and_colours_every_role() -> None:
    tokens = {r: 10 * (i + 1) for i, r in enumerate(reversed(ROLES))}
    score = IterationScore(iteration=1, harness_commit=None, harness_tag=None, pass_at_1=0.5, pass_at_k=0.5, k=1,
                           n_trials=2, n_passed=1, infra_errors=0, tokens=tokens, cost_usd={r: 0.0 for r in ROLES})
    roles, rows = _usage([1], Scores(iterations=[score]))
    assert roles == list(ROLES) and rows[0]["tokens"]["generator"] == tokens["generator"]
    colours = [role_color(r, roles) for r in roles]
    assert len(set(colours)) == len(ROLES)


def _config(tmp_path: Path, budgets: dict) -> Path:
    (tmp_path / "tasks").mkdir(parents=True)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"tasks": "tasks", "budgets": budgets}))
    return path


def test_a_budget_names_a_role_or_total(tmp_path: Path) -> None:
    cfg = load_experiment_config(_config(tmp_path, {"max_tokens": {"generator": 5, "reeval": 6, "total": 7}}))
    assert cfg.budgets.max_tokens == {"generator": 5, "reeval": 6, "total": 7}
    with pytest.raises(ConfigError, match="budgets.max_cost_usd.*unknown role 'evolv'"):
        load_experiment_config(_config(tmp_path / "b", {"max_cost_usd": {"evolv": 1.0}}))
