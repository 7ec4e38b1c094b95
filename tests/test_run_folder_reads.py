"""A run-folder file that is JSON but not its schema is read as missing *with a warning* naming the
file and the field (once), while a missing or half-written file stays silent (a run may be going)."""

import json
import logging

from ahe.run_folder.folder import read_model
from ahe.run_folder.records import Scores


def test_a_file_that_fails_its_schema_warns_once_naming_file_and_field(tmp_path, caplog):
    path = tmp_path / "scores.json"
    path.write_text(json.dumps({"best_pass_at_1": "nope"}))
    with caplog.at_level(logging.WARNING, logger="ahe.run_folder.folder"):
        assert read_model(path, Scores) is None
        assert read_model(path, Scores) is None
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1, warned
    assert str(path) in warned[0] and "best_pass_at_1" in warned[0] and "Scores" in warned[0]


def test_missing_and_half_written_files_are_silent(tmp_path, caplog):
    half = tmp_path / "half.json"
    half.write_text('{"best_pass_at_1": 0.5, "best_comm')
    with caplog.at_level(logging.WARNING, logger="ahe.run_folder.folder"):
        assert read_model(tmp_path / "missing.json", Scores) is None
        assert read_model(half, Scores) is None
    assert caplog.records == []
    half.write_text(json.dumps({"best_pass_at_1": 0.5}))
    assert read_model(half, Scores).best_pass_at_1 == 0.5


def test_the_tree_evolve_calls_made_are_the_child_folders_with_a_final_manifest(tmp_path):
    from ahe.run_folder import RunFolder

    run = RunFolder(tmp_path / "run")
    assert run.tree_evolve_calls() == 0 and run.iteration(1).tree_evolve_calls() == 0  # no iterations yet
    for it, i, name in ((1, 1, "manifest.json"), (1, 2, "manifest.json"), (2, 1, "manifest.json"),
                        (2, 2, "manifest.partial.json")):  # iteration 2's second call was killed before its end
        (run.iteration(it).tree_child(i) / "evolve").mkdir(parents=True)
        (run.iteration(it).tree_child(i) / "evolve" / name).write_text("{}")
    (run.iteration(2).tree / "merge" / "evolve").mkdir(parents=True)  # a merge is no evolve call
    (run.iteration(2).tree / "merge" / "evolve" / "manifest.json").write_text("{}")
    assert run.iteration(1).tree_child(2) == run.root / "iterations" / "001" / "tree" / "c2"
    assert [run.iteration(it).tree_evolve_calls() for it in (1, 2, 3)] == [2, 1, 0]
    assert run.tree_evolve_calls() == 3
