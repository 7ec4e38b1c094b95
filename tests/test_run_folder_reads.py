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
