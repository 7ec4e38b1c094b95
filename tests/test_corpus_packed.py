"""The packed corpus (a session's steps in one steps.md, debugger.steps) read by every reader.

A corpus built by the real builder from a synthetic iteration; every step its indexes list
must be readable and citable as `corpus/<task>/<trial>/step-NNN.md` by the debugger's tools,
the citation check, and the evolve agent's tools and evidence check — the names manifests
carry. If the layout and the readers drift apart, these fail.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from debugger import steps
from debugger.corpus import build_corpus
from debugger.paths import check_citation
from debugger.synthetic import make_iteration
from evolve_agent import record, tools_impl
from evolve_agent.confine import Confinement
from ahe.harness.manifest import ChangeEntry

ROOT = Path(__file__).resolve().parents[1]
REF = re.compile(r"corpus/[\w./-]+?/step-\d+\.md")


def corpus_tools():
    import importlib.util

    spec = importlib.util.spec_from_file_location("corpus_tools", ROOT / "debugger" / "workspace" / "tools" / "corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def wait_cleanup() -> None:
    for t in threading.enumerate():
        if t.name == "corpus-cleanup":
            t.join()


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A run folder whose iteration 001 has rollouts and a corpus built from them."""
    exp = tmp_path_factory.mktemp("packed") / "run"
    it = exp / "iterations" / "001"
    make_iteration(it, tasks=2, trials=2, turns=6, seed=3)
    b = build_corpus(it, workers=1)
    assert not b.errors and b.steps > 20
    (exp / "workspace").mkdir()
    return exp


def sessions(corpus: Path) -> list[Path]:
    return sorted(p.parent for p in corpus.rglob("index.md") if (p.parent / steps.STEPS).is_file())


def test_every_listed_step_reads_back_as_its_own_file(run):
    corpus = run / "iterations" / "001" / "corpus"
    folders = sessions(corpus)
    assert folders and not list(corpus.rglob("step-*.md"))  # packed: no file per step
    tools = corpus_tools()
    state = {"corpus_root": str(corpus)}
    total = 0
    for d in folders:
        table = steps.table_of(d)
        listed = [ln.split()[0] + ".md" for ln in (d / "index.md").read_text().splitlines() if ln.startswith("step-")]
        assert list(table) == listed and steps.step_names(d) == listed
        rel = d.relative_to(corpus).as_posix()
        label = rel
        # the spans tile steps.md exactly, in order
        n_lines = (d / steps.STEPS).read_bytes().count(b"\n")
        spans = list(table.values())
        assert spans[0][0] == 1 and spans[-1][1] == n_lines
        assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:]))
        for name, (a, b) in table.items():
            ref = f"corpus/{rel}/{name}"
            text = steps.read_text(d / name)
            assert text.startswith(f"# {label} · step {name[5:-3]} · "), (ref, text[:80])
            assert text.count("\n") == b - a + 1
            assert check_citation(corpus, ref).ok
            assert check_citation(corpus, f"{ref}#L1-L{b - a + 1}").ok
            assert not check_citation(corpus, f"{ref}#L1-L{b - a + 2}").ok
            out = tools.read_file(path=ref, state=state)
            assert out.startswith(f"{ref} (lines 1-") and text.split("\n")[0] in out
            total += 1
        listing = tools.list_files(path=f"corpus/{rel}", state=state)
        assert all(f"  {name}  " in listing for name in table)
    assert total > 20


def test_every_reference_inside_the_corpus_resolves(run):
    corpus = run / "iterations" / "001" / "corpus"
    refs = set()
    for f in corpus.rglob("*.md"):
        refs |= set(REF.findall(f.read_text()))
    assert any("/step-" in r for r in refs)  # dedup references and divergence notes name steps
    broken = [r for r in refs if not check_citation(corpus, r).ok]
    assert not broken


def test_grep_names_the_step_and_its_line(run):
    corpus = run / "iterations" / "001" / "corpus"
    d = sessions(corpus)[0]
    name, (a, b) = list(steps.table_of(d).items())[3]
    line = steps.read_text(d / name).split("\n")[2]  # a line inside that step
    needle = line.strip()[:40]
    tools = corpus_tools()
    hits = tools.grep(pattern=needle, path=f"corpus/{d.relative_to(corpus).as_posix()}", state={"corpus_root": str(corpus)})
    first = hits.split("\n")[1]
    ref, at = re.match(r"(corpus/\S+\.md):(\d+): ", first).groups()
    assert ref.rsplit("/", 1)[1].startswith("step-"), first  # never steps.md:<line>
    # what grep prints can be cited and read back as it is
    assert check_citation(corpus, f"{ref}#L{at}").ok
    got = tools.read_file(path=ref, start_line=int(at), end_line=int(at), state={"corpus_root": str(corpus)})
    assert needle in got


def test_the_evolve_agent_reads_greps_and_cites_packed_steps(run):
    it = run / "iterations" / "001"
    ctx = SimpleNamespace(confinement=Confinement(run / "workspace", run), experiment_dir=run, iteration=1)
    d = sessions(it / "corpus")[0]
    rel = d.relative_to(it / "corpus").as_posix()
    name = list(steps.table_of(d))[1]
    out = tools_impl.read_file(ctx, None, f"/experiment/iterations/001/corpus/{rel}/{name}")
    assert not getattr(out, "is_error", False), out
    assert f"# {rel} · step {name[5:-3]}" in out
    missing = tools_impl.read_file(ctx, None, f"/experiment/iterations/001/corpus/{rel}/step-999.md")
    assert missing.is_error
    needle = steps.read_text(d / name).split("\n")[0]
    hits = tools_impl.grep(ctx, None, re.escape(needle), f"/experiment/iterations/001/corpus/{rel}")
    assert f"/experiment/iterations/001/corpus/{rel}/{name}:1: {needle}" in hits
    entry = ChangeEntry(id="chg-1", component="system_prompt", files=["systemprompt.md"], summary="a summary",
                        root_cause="a root cause", targeted_fix="a fix", commit="0" * 40,
                        failure_evidence=[{"task": "t", "ref": f"corpus/{rel}/{name}#L1-L2"},
                                          {"task": "t", "ref": f"corpus/{rel}/step-999.md"}])
    assert record._evidence_missing(ctx, entry) == [f"corpus/{rel}/step-999.md"]


def test_a_link_in_place_of_steps_md_is_not_followed(tmp_path):
    corpus = tmp_path / "corpus"
    d = corpus / "t" / "trial-1"
    d.mkdir(parents=True)
    secret = tmp_path / "secret.md"
    secret.write_text("# t/trial-1 · step 001 · user\n\nthe expected output\n")
    (d / "index.md").write_text("# Index — t/trial-1\n\nstep-001 steps.md:1-3 user x\n")
    os.symlink(secret, d / "steps.md")
    assert not check_citation(corpus, "corpus/t/trial-1/step-001.md").ok
    assert corpus_tools().read_file(path="corpus/t/trial-1/step-001.md", state={"corpus_root": str(corpus)}).is_error


def test_a_killed_build_never_leaves_a_corpus_that_looks_complete(tmp_path):
    it = tmp_path / "it"
    make_iteration(it, tasks=2, trials=2, turns=4, seed=5)
    # killed after every file is written, just before the swap: the worst moment
    code = ("import os, signal, sys; from pathlib import Path; import debugger.corpus as c\n"
            "c._root_index = lambda outputs: os.kill(os.getpid(), signal.SIGKILL)\n"
            f"c.build_corpus(Path({str(it)!r}), workers=1)\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True)
    assert p.returncode == -signal.SIGKILL
    assert not (it / "corpus").exists()
    [half] = [x for x in it.iterdir() if x.name.startswith(".corpus")]
    assert half.name.startswith(".corpus.tmp-") and list(half.rglob(steps.STEPS))  # every step written, never swapped in
    b = build_corpus(it, workers=1)  # the next build (a resumed debug phase) rebuilds it and sweeps the half-built one
    wait_cleanup()
    assert not b.errors and (it / "corpus" / "index.md").is_file()
    assert not [x for x in it.iterdir() if x.name.startswith(".corpus")]
    for d in sessions(it / "corpus"):
        assert all(check_citation(it / "corpus", f"corpus/{d.relative_to(it / 'corpus').as_posix()}/{n}").ok
                   for n in steps.table_of(d))
