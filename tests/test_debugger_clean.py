"""Cleaning of trace text, and the corpus built by worker processes."""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
from pathlib import Path

from debugger.clean import CleanConfig, Cleaner
from debugger.corpus import build_corpus
from debugger.facts import classify_result
from debugger.synthetic import make_iteration
from debugger.steps import step_names


def b64(n: int, seed: int = 1) -> str:
    return base64.b64encode(random.Random(seed).randbytes(n)).decode()


def test_base64_blobs_are_dropped_and_look_alikes_kept():
    c = Cleaner()
    blob = b64(3000)
    out = c.clean(f"exit code: 0\nimage: data:image/png;base64,{blob}\ndone", dedup=False)
    assert blob[:100] not in out.text and out.blobs == 1
    assert out.text.startswith("exit code: 0\nimage: data:image/png;base64,[base64 blob dropped: 4,000 characters, sha1 ")
    assert out.text.endswith("]\ndone")
    wrapped = base64.encodebytes(random.Random(2).randbytes(2000)).decode()  # 76-character lines
    out = c.clean("before\n" + wrapped + "after", dedup=False)
    assert out.blobs == 1 and out.text.count("[base64 blob dropped") == 1 and "before" in out.text and "after" in out.text
    kept = ("sha256:" + "ab12" * 16 + "\n" + "a" * 300 + "\n" + "/usr/lib/python3/dist-packages/" * 10
            + "\nAAAAAAAAAABBBBBBBBBBCCCCCCCCCC" * 3 + "\n" + "x" * 39)
    assert c.clean(kept, dedup=False).text == kept  # hex ids, letter runs, paths: not base64
    assert c.stats.blobs == 2


def test_binary_ansi_and_progress_bars():
    c = Cleaner()
    binary = "".join(chr(random.Random(3).randrange(0, 32)) for _ in range(50)) + "\x00\ufffd" * 200 + "ELF"
    out = c.clean("x" + binary, dedup=False)
    assert out.binary and out.text.startswith("[binary data dropped: 454 characters")
    assert "\x00" not in out.text
    colored = "\x1b[32mPASSED\x1b[0m test_a\n\x1b[1;31mFAILED\x1b[0m test_b " + "." * 40
    assert c.clean(colored, dedup=False).text == "PASSED test_a\nFAILED test_b " + "." * 40
    bar = "Downloading 10%\rDownloading 50%\rDownloading 100%\nInstalled foo 1.0" + " " * 30
    assert c.clean(bar, dedup=False).text == "Downloading 100%\nInstalled foo 1.0" + " " * 30
    few = "ok" + "\x07" + "y" * 100  # a stray control character is not a binary output
    assert not c.clean(few, dedup=False).binary


def test_repeats_become_references_and_huge_texts_are_cut_head_and_tail():
    c = Cleaner(CleanConfig(max_chars=1000, head_chars=300, tail_chars=400, min_dedup_chars=50))
    text = "\n".join(f"line {i}" for i in range(1, 501))
    first = c.clean(text, ref="corpus/t/trial-1/step-003.md (result 1)", raw_pointer="rollouts/t/trial-1/trajectory.json, step 3, result 1")
    assert first.truncated == len(text) - 700 and first.text.startswith("line 1\nline 2\n")
    assert first.text.endswith("line 500") and "line 250\n" not in first.text
    assert "characters cut (lines 39–456); full text: rollouts/t/trial-1/trajectory.json, step 3, result 1 ...]" in first.text
    again = c.clean(text, ref="corpus/t/trial-2/step-005.md (result 1)")
    assert again.dup_of == "corpus/t/trial-1/step-003.md (result 1)"
    assert again.text == f"[identical to corpus/t/trial-1/step-003.md (result 1) — {len(text):,} characters, not repeated]"
    short = "exit code: 0"
    assert c.clean(short, ref="a").text == short and c.clean(short, ref="b").text == short  # too short to reference
    assert c.stats.deduplicated == 1 and c.stats.truncated == 1


def test_error_signatures():
    sig, timeout = classify_result("sh", "exit code: 1\nok so far\n[stderr]\nTraceback...\n  File \"/tmp/tmpab12cd/x.py\", line 3\nKeyError: 'id 12345'", False)
    assert sig == "sh: exit 1: KeyError: 'id N'" and not timeout
    assert classify_result("sh", "timed out after 120s and was killed\nexit code: -9", False) == ("sh: timed out", True)
    assert classify_result("t", "invalid arguments for tool t: 'x' is a required property", True)[0] == "t: invalid arguments for tool t: 'x' is a required property"
    assert classify_result("sh", "exit code: 0\nValueError in the log is fine", False) == (None, False)


def test_worker_processes_build_the_same_corpus(tmp_path):
    one = tmp_path / "one"
    make_iteration(one, tasks=5, trials=2, turns=8, seed=7)
    two = tmp_path / "two"
    shutil.copytree(one, two)
    a = build_corpus(one, workers=1)
    b = build_corpus(two, workers=2)
    assert b.workers == 2 and not a.errors and not b.errors
    files_a = sorted(p.relative_to(one / "corpus") for p in (one / "corpus").rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(two / "corpus") for p in (two / "corpus").rglob("*") if p.is_file())
    assert files_a == files_b and len(files_a) == a.files
    for rel in files_a:
        assert (one / "corpus" / rel).read_bytes() == (two / "corpus" / rel).read_bytes()
    assert (a.raw_bytes, a.corpus_bytes, a.steps) == (b.raw_bytes, b.corpus_bytes, b.steps)
    assert a.clean["blobs"] > 0 and a.clean["deduplicated"] > 0 and a.clean["progress"] > 0 and a.clean["ansi"] > 0
    assert a.corpus_bytes < a.raw_bytes
    # a rebuild replaces the corpus in one swap and leaves no temporary folder behind
    build_corpus(one, workers=1)
    assert not [p for p in one.iterdir() if p.name.startswith(".corpus.tmp")]
    raw = json.loads((one / "rollouts" / "task-000" / "trial-1" / "trajectory.json").read_text())
    assert len(step_names(one / "corpus" / "task-000" / "trial-1")) == len(raw["steps"])
    assert os.path.isfile(one / "corpus" / "index.md")
