"""Every table command in three forms (ahe.tables): legible at 80 columns, valid Markdown, JSON that parses."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from rich.console import Console
from rich.table import Table

from ahe.demo import X, Y, agent_policy
from ahe.errors import AheError
from ahe.tables import TableOutput, markdown_table, optional, resolve_format
from tests.test_audit import demo_run_dir

REPO = Path(__file__).resolve().parent.parent
TASKS = REPO / "examples" / "tasks"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
ROW = re.compile(r"^\|(.*)\|$")
RULE = re.compile(r"^\|(\s*:?-{3,}:?\s*\|)+$")


def ahe(*args: str, width: int = 80, ok: tuple[int, ...] = (0,)) -> str:
    env = {**os.environ, "COLUMNS": str(width), "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "ahe.cli", *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env=env)
    assert proc.returncode in ok, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def pipe_tables(text: str) -> list[list[list[str]]]:
    """The pipe tables of a Markdown text, each as rows of cells; asserts each is well formed."""
    tables, block = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            block.append(line)
            continue
        if block:
            assert len(block) >= 2 and RULE.match(block[1]), block[:2]
            rows = [[c.strip() for c in re.split(r"(?<!\\)\|", ROW.match(b).group(1))] for b in block]
            assert len({len(r) for r in rows}) == 1, f"rows of different lengths: {block}"
            tables.append([rows[0], *rows[2:]])
            block = []
    return tables


def check_forms(*args: str, ok: tuple[int, ...] = (0,), json_alias: bool = True) -> dict:
    """The command in each form; returns its JSON."""
    table = ahe(*args, "--format", "table", ok=ok)
    markdown = ahe(*args, "--format", "markdown", ok=ok)
    data = json.loads(ahe(*args, "--format", "json", ok=ok))
    if json_alias:  # the same document (a mock's port may differ between runs)
        alias = json.loads(ahe(*args, "--json", ok=ok))
        assert type(alias) is type(data) and (alias.keys() == data.keys() if isinstance(data, dict) else alias == data)
    assert "…" not in table, table
    assert max(len(line) for line in table.splitlines()) <= 80, table
    tables = pipe_tables(markdown)
    assert tables, markdown
    for headers, *_ in tables:  # every header word is whole in the terminal form (as a header, a label or a note)
        for word in " ".join(headers).split():
            assert word in table, f"{word!r} of {headers} is not whole at 80 columns:\n{table}"
    return data


# ---------------------------------------------------------------------------- the helper


def test_format_and_its_json_alias() -> None:
    assert resolve_format(None) == "table" and resolve_format(None, True) == "json" and resolve_format("json", True) == "json"
    assert resolve_format(True) == "json" and resolve_format(False) == "table"
    with pytest.raises(AheError, match="--format must be table, markdown or json, not 'xml'"):
        resolve_format("xml")
    with pytest.raises(AheError, match="--json asks for JSON but --format asks for markdown"):
        resolve_format("markdown", True)


def _wide_table() -> Table:
    t = Table(title="wide")
    for h in ("variant", "pass@1", "Δ vs seed [95% CI]", "tokens/trial", "succ./Mtok", "fixes vs seed", "breaks vs seed",
              "infra", "inconclusive verdicts", "predicted regressions"):
        t.add_column(h, justify="right" if h != "variant" else "left")
    for i in range(3):
        t.add_row(f"only long_term_memory {i}", "0.667", "+33.3 [0.0, 66.7]", "1,234", "480.2", "word-frequency-top",
                  "fix|service", "0", "2", "[bold]x[/]")
    return t


@pytest.mark.parametrize("width", [40, 60, 80, 100, 140])
def test_a_wide_table_never_cuts_a_header_word(width: int) -> None:
    buf = io.StringIO()
    TableOutput("table", Console(file=buf, width=width, color_system=None)).print(_wide_table())
    text = buf.getvalue()
    assert "…" not in text and max(map(len, text.splitlines())) <= width
    for h in ("variant", "pass@1", "Δ", "tokens/trial", "succ./Mtok", "fixes", "breaks", "inconclusive", "verdicts",
              "predicted", "regressions"):
        assert h in text, (h, text)


def test_uniform_and_optional_columns_are_named_when_left_out() -> None:
    t = Table(title="tasks")
    for h in ("task", "runs on", "difficulty", "category", "agent", "verifier", "tags"):
        t.add_column(h)
    for i in range(4):
        t.add_row(f"a-rather-long-task-name-{i}", "local", ["easy", "medium"][i % 2], f"implement-to-spec-{i}",
                  f"{600 + i}s", f"{60 + i}s", f"python, cron, datetime, parsing, edge-cases-{i}")
    buf = io.StringIO()
    TableOutput("table", Console(file=buf, width=80, color_system=None)).print(optional(t, "agent", "verifier"))
    text = buf.getvalue()
    assert "in every row: runs on local" in text and "left out at this width: agent" in text
    assert "a-rather-long-task-name-3" in text and "implement-to-spec" in text


def test_markdown_escapes_pipes_and_keeps_alignment() -> None:
    md = markdown_table(_wide_table())
    (headers, *rows), = pipe_tables(md)
    assert headers[0] == "variant" and rows[0][6] == "fix\\|service" and rows[0][9] == "x"
    assert md.splitlines()[3].startswith("|---|---:|")


def test_swe_ci_playground_and_generate_tables_in_three_forms(tmp_path: Path, capsys) -> None:
    from ahe.tasks.sources.playground.cli import _summary_table
    from ahe.tasks.sources.playground.generate.pipeline import summarize
    from ahe.tasks.sources.swe_ci.cli import _print
    from ahe.tasks.sources.swe_ci.maker import MakeResult

    results = [MakeResult(name="acme-widgets-0123456-89abcde", path=tmp_path / "acme-widgets-0123456-89abcde", n_base=12,
                          n_target=19, gap=7, kept=True),
               MakeResult(name="acme-widgets-1111111-2222222", path=None, n_base=3, n_target=4, gap=1,
                          reason="the gap n(c*) - n(c0) = 1 is below --min-gap 5")]
    report = SimpleNamespace(tasks=[SimpleNamespace(split="train", project="textkit", kind=k)
                                    for k in ("implement", "library", "fix", "fix", "reproduce")])
    (tmp_path / "gen").mkdir()
    renderables = [_summary_table(report, "5 task(s) derived into out"), summarize(tmp_path / "gen")]
    for width in (80, 60):
        buf = io.StringIO()
        out = TableOutput("table", Console(file=buf, width=width, color_system=None))
        for r in renderables:
            out.print(r)
        assert "…" not in buf.getvalue() and max(map(len, buf.getvalue().splitlines())) <= width
    assert _print(results, False, "json") == 1
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == [r.name for r in results]
    _print(results, False, "markdown")
    (headers, *rows), = pipe_tables(capsys.readouterr().out)
    assert headers == ["task", "n(c0)", "n(c*)", "gap", "kept", "where / why not"] and len(rows) == 2


# ---------------------------------------------------------------------------- the commands


def test_doctor_tasks_list_and_sources() -> None:
    assert json.loads(ahe("doctor", "--format", "json", ok=(0, 1)))["checks"]
    check_forms("doctor", ok=(0, 1))
    data = check_forms("tasks", "list", str(TASKS))
    assert len(data["tasks"]) >= 20
    assert [s["name"] for s in check_forms("tasks", "sources")][0] == "folder"


@needs_bwrap
def test_tasks_check(tmp_path: Path) -> None:
    data = check_forms("tasks", "check", str(TASKS), "--task", X, "--concurrency", "1", json_alias=False)
    assert data["tasks"][0]["name"] == X


@needs_bwrap
def test_eval_and_transfer(tmp_path: Path) -> None:
    policy = tmp_path / "agent.yaml"
    policy.write_text(yaml.safe_dump(agent_policy(), sort_keys=False))
    common = ["--tasks", str(TASKS), "--task", X, "--task", Y, "-k", "1", "--mock-policy", str(policy)]
    data = json.loads(ahe("eval", "-w", str(REPO / "harness_workspace"), *common, "--out", str(tmp_path / "e"), "--json"))
    assert data["n_trials"] == 2
    again = check_forms("eval", "-w", str(REPO / "harness_workspace"), *common, "--out", str(tmp_path / "e"))
    assert again["n_trials"] == 2  # resumed: the trials ran once
    ahe("transfer", "--harness", "seed", "--models", "mock-a", *common, "--out", str(tmp_path / "t"), "--json")
    assert check_forms("transfer", "--harness", "seed", "--models", "mock-a", *common, "--out", str(tmp_path / "t"))["rows"]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    return demo_run_dir(tmp_path_factory)


@needs_bwrap
def test_audit_and_ablate_on_the_demo_run(demo_run: Path, tmp_path: Path) -> None:
    audit = check_forms("audit", str(demo_run))
    assert audit["iterations"]
    args = ("ablate", f"{demo_run}@1", "--tasks", str(TASKS), "--task", X, "-k", "1", "--out", str(tmp_path / "a"))
    ahe(*args, "--json")
    assert {v["label"] for v in check_forms(*args)["variants"]} >= {"seed", "full"}


def test_simulate(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(yaml.safe_dump({"name": "tiny", "tasks": {"count": 20}, "seeds": 1, "iterations": 1}))
    rows = check_forms("simulate", "--scenario", str(scenario), "--out", str(tmp_path / "s"), "--jobs", "1",
                       "--keep-runs", "none", json_alias=False)
    assert {r["policy"] for r in rows} >= {"paper", "noise"}
