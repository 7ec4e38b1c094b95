"""The trace a confined worker hands back: only what changed crosses the socket, and the host
writes a tail only into a file it wrote itself (ahe/confine/trace_files.py)."""

from __future__ import annotations

import base64
import json
import os

import pytest

from ahe.confine.trace_files import TraceShipper, TraceSink, _common_prefix


def _round(shipper: TraceShipper, sink: TraceSink, **kw) -> dict:
    files = shipper.changed(**kw)
    shipper.handed(sink.write(files))
    return files


def test_after_the_first_hand_over_only_the_changed_tail_crosses(tmp_path):
    jail, host = tmp_path / "jail", tmp_path / "host"
    (jail / "sub_agents" / "01-helper").mkdir(parents=True)
    host.mkdir()
    shipper, sink = TraceShipper(jail, 1 << 20), TraceSink(host, 1 << 20)
    events = jail / "events.jsonl"
    events.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(200)))
    (jail / "trajectory.json").write_text('{"steps": [1, 2, 3]}')
    (jail / "sub_agents" / "01-helper" / "trajectory.json").write_text("[]")
    first = _round(shipper, sink)
    assert all(isinstance(v, str) for v in first.values()) and len(first) == 3  # whole, the first time

    with events.open("a") as f:
        f.write('{"n": 200}\n')
    (jail / "trajectory.json").write_text('{"steps": [1, 2, 3, 4]}')  # a rewritten tail
    second = _round(shipper, sink)
    assert set(second) == {"events.jsonl", "trajectory.json"}  # the unchanged file is not sent
    assert second["events.jsonl"]["at"] == events.stat().st_size - len('{"n": 200}\n')
    assert base64.b64decode(second["events.jsonl"]["data"]) == b'{"n": 200}\n'
    assert base64.b64decode(second["trajectory.json"]["data"]) == b', 4]}'

    (jail / "trajectory.json").write_text('{"steps": [9]}')  # shorter: the host's copy is cut too
    _round(shipper, sink)
    assert _round(shipper, sink, final=True) == {}  # nothing changed since
    assert (host / "events.jsonl").read_bytes() == events.read_bytes()
    assert (host / "trajectory.claimed.json").read_bytes() == b'{"steps": [9]}'
    assert (host / "sub_agents" / "01-helper" / "trajectory.claimed.json").read_bytes() == b"[]"  # a claim too


def test_the_host_writes_a_tail_only_past_bytes_it_wrote_itself(tmp_path):
    sink = TraceSink(tmp_path, 1 << 20)
    tail = {"at": 0, "data": base64.b64encode(b"x").decode()}
    assert sink.write({"events.jsonl": tail}) != []  # a tail of a file this sink never wrote
    assert not (tmp_path / "events.jsonl").exists()
    assert sink.write({"events.jsonl": base64.b64encode(b"abc").decode()}) == []
    assert sink.write({"events.jsonl": {"at": 4, "data": tail["data"]}}) != []  # past its end
    assert sink.write({"events.jsonl": {"at": -1, "data": tail["data"]}}) != []
    assert sink.write({"events.jsonl": {"at": "1", "data": tail["data"]}}) != []
    assert [r.split(" (")[0] for r in sink.write({"result.json": tail, "../evil": tail})] == ["result.json", "../evil"]
    assert (tmp_path / "events.jsonl").read_bytes() == b"abc"
    assert sink.write({"events.jsonl": {"at": 3, "data": tail["data"]}}) != []  # refused before: whole first
    assert sink.write({"events.jsonl": base64.b64encode(b"abc").decode()}) == []
    assert sink.write({"events.jsonl": {"at": 3, "data": tail["data"]}}) == []
    assert (tmp_path / "events.jsonl").read_bytes() == b"abcx"

    (tmp_path / "outside.txt").write_text("keep")
    os.unlink(tmp_path / "events.jsonl")
    os.symlink(tmp_path / "outside.txt", tmp_path / "events.jsonl")
    with pytest.raises(OSError):  # never through a link
        sink.write({"events.jsonl": {"at": 0, "data": tail["data"]}})
    assert (tmp_path / "outside.txt").read_text() == "keep"


def test_a_tail_counts_the_whole_file_against_the_cap(tmp_path):
    sink = TraceSink(tmp_path, 1000)
    assert sink.write({"events.jsonl": base64.b64encode(b"x" * 900).decode()}) == []
    refused = sink.write({"events.jsonl": {"at": 900, "data": base64.b64encode(b"y" * 200).decode()}})
    assert len(refused) == 1 and "over the session's" in refused[0]
    assert (tmp_path / "events.jsonl").read_bytes() == b"x" * 900


def test_a_file_the_host_refused_is_sent_whole_again(tmp_path):
    jail = tmp_path / "jail"
    jail.mkdir()
    shipper, sink = TraceShipper(jail, 1 << 20), TraceSink(tmp_path / "host", 1 << 20)
    (tmp_path / "host").mkdir()
    (jail / "notes.txt").write_text("a")  # not a name a session writes
    assert _round(shipper, sink) == {"notes.txt": base64.b64encode(b"a").decode()}
    (jail / "notes.txt").write_text("ab")
    assert _round(shipper, sink) == {"notes.txt": base64.b64encode(b"ab").decode()}  # whole, not a tail
    assert not (tmp_path / "host" / "notes.txt").exists()


def test_links_and_fifos_in_the_workers_trace_are_not_read(tmp_path):
    (tmp_path / "secret").write_text("s")
    os.symlink(tmp_path / "secret", tmp_path / "events.jsonl")
    os.mkfifo(tmp_path / "trajectory.json")
    assert TraceShipper(tmp_path, 1 << 20).changed() == {"secret": base64.b64encode(b"s").decode()}


@pytest.mark.parametrize("a,b,n", [(b"", b"", 0), (b"abc", b"abc", 3), (b"abc", b"abd", 2), (b"abc", b"abcdef", 3),
                                   (b"xbc", b"abc", 0), (b"a" * 1000 + b"b", b"a" * 1000 + b"c", 1000)])
def test_common_prefix(a, b, n):
    assert _common_prefix(a, b) == n


def test_after_a_refusal_no_tail_of_that_file_is_written_until_it_comes_whole(tmp_path):
    """A worker does not wait for the host's answer to a hand-over, so it may send tails of a
    file the host refused: none is written onto the host's older copy."""
    sink = TraceSink(tmp_path, 1000)
    blob = lambda b: base64.b64encode(b).decode()  # noqa: E731
    assert sink.write({"events.jsonl": blob(b"a" * 600)}) == []
    assert sink.write({"events.jsonl": {"at": 600, "data": blob(b"b" * 500)}}) != []  # over the cap
    assert sink.write({"events.jsonl": {"at": 10, "data": blob(b"c")}}) != []  # fits, but onto the old copy
    assert (tmp_path / "events.jsonl").read_bytes() == b"a" * 600
    assert sink.write({"events.jsonl": blob(b"d" * 700)}) == []  # whole again: tails fit after it
    assert sink.write({"events.jsonl": {"at": 700, "data": blob(b"e")}}) == []
    assert (tmp_path / "events.jsonl").read_bytes() == b"d" * 700 + b"e"
