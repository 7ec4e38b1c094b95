"""`ahe report`: the HTML dashboard, rendered from a real demo run and loaded in headless Chromium.

The browser is driven over the DevTools protocol on `--remote-debugging-pipe` (fds 3/4,
NUL-terminated JSON) with the standard library only: the test records every console message,
exception and network request of the page, checks the DOM, and saves a screenshot under
test-artifacts/ (git-ignored). Needs Debian's `chromium` package; skipped with that reason
if it is absent.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ahe.report.html import report_command
from tests.shared_runs import copy_run, line_demo

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# CI sets AHE_REQUIRE_CHROMIUM=1: there a missing browser must fail the tests, not skip them.
_REQUIRE = os.environ.get("AHE_REQUIRE_CHROMIUM") == "1"
needs_chromium = pytest.mark.skipif(CHROMIUM is None and not _REQUIRE,
                                    reason="Debian's `chromium` is not installed (apt-get install -y chromium)")


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> Path:
    """A real run folder: the demo scenario through `ahe evolve` (3 iterations + final eval), built once
    a session (tests/shared_runs.py); read only: a test that writes into it copies it first."""
    run = line_demo(tmp_path_factory)
    assert (run / "scores.json").exists()
    return run


# ---------------------------------------------------------------- a tiny DevTools client
class Chromium:
    """Headless Chromium over --remote-debugging-pipe; records the page's events."""

    def __init__(self, profile: Path) -> None:
        a_r, a_w = os.pipe()  # we write commands → chromium reads fd 3
        b_r, b_w = os.pipe()  # chromium writes fd 4 → we read

        def child_fds() -> None:
            hi_r = fcntl.fcntl(a_r, fcntl.F_DUPFD, 10)
            hi_w = fcntl.fcntl(b_w, fcntl.F_DUPFD, 10)
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1400,2400",
                f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
        # fds 3/4 are set up in the child (preexec_fn only calls fcntl/dup2: async-signal-safe)
        with open(profile.parent / "chromium-stderr.txt", "wb") as err:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                         preexec_fn=child_fds, close_fds=False)
        os.close(a_r)
        os.close(b_w)
        self.wfd, self.rfd = a_w, b_r
        self.msgs: queue.Queue = queue.Queue()
        self.events: list[dict] = []
        self.next_id = 0
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self.rfd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                self.msgs.put(json.loads(raw))
        self.msgs.put(None)

    def _pump(self, until, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            try:
                m = self.msgs.get(timeout=left)
            except queue.Empty:
                raise TimeoutError("chromium did not answer in time") from None
            if m is None:
                raise RuntimeError("chromium closed the DevTools pipe")
            if "method" in m:
                self.events.append(m)
            if until(m):
                return m

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        self.next_id += 1
        mid = self.next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.wfd, json.dumps(msg).encode() + b"\0")
        reply = self._pump(lambda m: m.get("id") == mid, timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, timeout: float = 30) -> dict:
        for e in self.events:
            if e["method"] == method:
                return e
        return self._pump(lambda m: m.get("method") == method, timeout)

    def drain(self, seconds: float) -> None:
        try:
            self._pump(lambda m: False, seconds)
        except TimeoutError:
            pass

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.wfd, self.rfd):
            try:
                os.close(fd)
            except OSError:
                pass


def load_in_chromium(html: Path, tmp: Path, screenshot: Path | None = None, clip: str | None = None) -> dict:
    """Load the file; return {"console": [...], "exceptions": [...], "requests": [...], "dom": {...}}.
    With `clip` (a CSS selector) the screenshot is cropped to that element."""
    assert CHROMIUM, "AHE_REQUIRE_CHROMIUM=1 but no chromium on PATH (apt-get install -y chromium)"
    profile = tmp / "chromium-profile"
    profile.mkdir(parents=True, exist_ok=True)
    c = Chromium(profile)
    try:
        target = c.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        sid = c.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            c.send(f"{domain}.enable", session=sid)
        c.send("Emulation.setDeviceMetricsOverride",
               {"width": 1400, "height": 2400, "deviceScaleFactor": 1, "mobile": False}, session=sid)
        c.events.clear()
        c.send("Page.navigate", {"url": html.resolve().as_uri()}, session=sid)
        c.wait_event("Page.loadEventFired")
        c.drain(1.0)  # late console messages or requests
        probe = """JSON.stringify({
          curve: !!document.querySelector('#pass-curve path.pass-line'),
          best: !!document.querySelector('#pass-curve path.best-line'),
          curvePoints: document.querySelectorAll('#pass-curve circle.pt').length,
          heatmapCells: document.querySelectorAll('#heatmap g.cell').length,
          heatmapStates: Array.from(document.querySelectorAll('#heatmap g.cell')).map(g => g.getAttribute('class')),
          legend: !!document.querySelector('#heatmap-legend'),
          changes: Array.from(document.querySelectorAll('#sec-timeline article.change')).map(a => [a.id, a.dataset.verdict]),
          diffs: document.querySelectorAll('#sec-timeline pre.diff').length,
          evidence: Array.from(document.querySelectorAll('a.evidence')).map(a => a.getAttribute('href')),
          predictions: document.querySelectorAll('#predictions-table tr').length,
          usage: document.querySelectorAll('#usage-table tr').length,
          transfer: !!document.querySelector('#transfer-table'),
          scripts: document.querySelectorAll('script').length,
          imgs: document.querySelectorAll('img').length,
          difficultyLines: document.querySelectorAll('#difficulty-curves path').length,
          difficultyTitles: Array.from(document.querySelectorAll('#difficulty-curves circle title')).map(t => t.textContent),
          attributionBars: Array.from(document.querySelectorAll('#attribution-chart rect title')).map(t => t.textContent),
          attributionLine: document.querySelectorAll('#attribution-chart circle.pt').length,
          calibrationRows: Array.from(document.querySelectorAll('#calibration-table tr')).map(r => r.innerText),
          efficiencyRows: Array.from(document.querySelectorAll('#efficiency-table tr')).map(r => r.innerText),
          figuresBox: (() => { const b = document.querySelector('#attribution-chart').getBoundingClientRect(); return [b.width, b.height]; })(),
          treeSection: !!document.querySelector('#sec-tree'),
          treeNodes: Array.from(document.querySelectorAll('#search-tree g.tree-node')).map(g => [g.dataset.node, g.getAttribute('class')]),
          treeEdges: Array.from(document.querySelectorAll('#search-tree g.tree-edge')).map(g => [g.dataset.from, g.dataset.to, g.getAttribute('class')]),
          treeLabels: Array.from(document.querySelectorAll('#search-tree text.edge-label')).map(t => t.firstChild.textContent),
          treeLegend: !!document.querySelector('#tree-legend'),
          treeBest: (document.querySelector('#tree-best') || {}).innerText || null,
          treeMerges: Array.from(document.querySelectorAll('#tree-merges tr')).map(r => r.innerText),
          treeBox: (() => { const e = document.querySelector('#search-tree'); if (!e) return null; const b = e.getBoundingClientRect(); return [b.width, b.height]; })(),
          text: document.body.innerText
        })"""
        res = c.send("Runtime.evaluate", {"expression": probe, "returnByValue": True}, session=sid)
        dom = json.loads(res["result"]["value"])
        if screenshot is not None:
            params: dict = {"format": "png", "captureBeyondViewport": False}
            if clip:
                rect = c.send("Runtime.evaluate", {"expression": f"JSON.stringify((() => {{ const b = document.querySelector("
                              f"{json.dumps(clip)}).getBoundingClientRect(); return [b.left + scrollX, b.top + scrollY, b.width, "
                              "b.height]; })())", "returnByValue": True}, session=sid)
                x, y, w, h = json.loads(rect["result"]["value"])
                params.update(clip={"x": x, "y": y, "width": w, "height": h, "scale": 1}, captureBeyondViewport=True)
            shot = c.send("Page.captureScreenshot", params, session=sid)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            screenshot.write_bytes(base64.b64decode(shot["data"]))
        ev = [e for e in c.events if e.get("sessionId") == sid]
        console = [e["params"] for e in ev if e["method"] == "Runtime.consoleAPICalled"]
        logs = [e["params"]["entry"] for e in ev if e["method"] == "Log.entryAdded"]
        return {
            "console_errors": [m for m in console if m.get("type") in ("error", "assert", "warning")]
                              + [lg for lg in logs if lg.get("level") in ("error", "warning")],
            "exceptions": [e["params"] for e in ev if e["method"] == "Runtime.exceptionThrown"],
            "dialogs": [e["params"] for e in ev if e["method"] == "Page.javascriptDialogOpening"],
            "requests": [e["params"]["request"]["url"] for e in ev if e["method"] == "Network.requestWillBeSent"],
            "dom": dom,
        }
    finally:
        c.close()


# ---------------------------------------------------------------- tests
def test_report_file_is_self_contained(demo_run: Path, tmp_path: Path) -> None:
    out = report_command(demo_run, tmp_path / "r" / "report.html", False)
    html = out.read_text()
    assert out.stat().st_size < 200_000
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    assert 'id="pass-curve"' in html and 'id="heatmap"' in html and 'id="sec-timeline"' in html
    # default location: RUN_DIR/report.html, evidence links relative to it
    run = copy_run(demo_run, tmp_path / "run")  # not into the shared run
    default = report_command(run, None, False)
    assert default == run / "report.html"
    assert 'href="iterations/001/corpus/' in default.read_text()


def test_report_shows_the_regression_only_the_replay_foresaw(demo_run: Path, tmp_path: Path) -> None:
    import re

    html = report_command(demo_run, tmp_path / "report.html", False).read_text()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    y = "fix-service-config"
    assert f"replay at risk {y} — corpus/{y}/trial-1/step-003.md: call run_shell_command denied" in text
    assert f"foreseen by replay {y} regressed, as the replay foresaw" in text
    assert "only text changed (LongTermMEMORY.md)" in text  # the lesson: not replayable
    table = text[text.index("Regression foresight"):]
    assert "2 agent 0 0 1 — — 0.00 0.00" in table
    assert "2 replay 1 1 1 1.00 0.33 1.00 0.33" in table and "2 agent ∪ replay 1 1 1 1.00 0.33 1.00 0.33" in table


@needs_chromium
def test_report_loads_in_headless_chromium(demo_run: Path, tmp_path: Path) -> None:
    run = copy_run(demo_run, tmp_path / "run")  # the report goes into RUN_DIR; not into the shared run
    out = report_command(run, None, False)
    shot = ARTIFACTS / "report-demo.png"
    r = load_in_chromium(out, tmp_path, screenshot=shot)
    assert r["console_errors"] == [], r["console_errors"]
    assert r["exceptions"] == [], r["exceptions"]
    assert all(u == out.resolve().as_uri() for u in r["requests"]), r["requests"]
    dom = r["dom"]
    assert dom["curve"] and dom["best"] and dom["curvePoints"] == 4
    assert dom["heatmapCells"] == 3 * 4 and dom["legend"]
    assert any("failed" in c for c in dom["heatmapStates"]) and any("rate" in c for c in dom["heatmapStates"])
    verdicts = {cid.split("-", 2)[2]: v for cid, v in dom["changes"]}
    assert verdicts["chg-1"] == "keep" and verdicts["chg-2"] == "rollback", dom["changes"]
    assert dom["diffs"] >= 2
    assert dom["evidence"] and all(e.startswith("iterations/001/corpus/") for e in dom["evidence"])
    assert all((run / e).exists() for e in dom["evidence"])
    assert dom["predictions"] >= 3 and dom["usage"] >= 5
    assert not dom["transfer"] and dom["scripts"] == 0
    assert not dom["treeSection"] and dom["treeNodes"] == []  # a line run: no search tree section
    # the paper's figures: pass@1 by difficulty (the demo's three tasks are easy: overall + easy lines),
    # the self-attribution of round 2 (chg-1 fixed X as predicted; chg-2 predicted Z, which did not
    # improve; Y regressed unpredicted), calibration, Succ/Mtok per iteration
    assert dom["difficultyLines"] == 2 and "iteration 3 · easy: pass@1 0.667" in dom["difficultyTitles"]
    assert set(dom["attributionBars"]) == {"round 2 · fixes: 1 true positives", "round 2 · fixes: 1 false positives",
                                           "round 2 · regressions: 1 misses"}, dom["attributionBars"]
    assert dom["attributionLine"] == 1 and dom["figuresBox"][0] > 300 and dom["figuresBox"][1] > 100
    assert dom["calibrationRows"][1].split("\t")[:4] == ["fix", "1", "0.50", "0.50"], dom["calibrationRows"]
    assert len(dom["efficiencyRows"]) == 1 + 4 and dom["efficiencyRows"][3].split("\t")[:3] == ["3", "0.667", "0.667"]
    assert shot.exists() and shot.stat().st_size > 10_000


@needs_chromium
def test_half_finished_run_with_hostile_text(demo_run: Path, tmp_path: Path) -> None:
    """A run still going (last results.json and attribution missing), with agent text that tries
    to inject markup and fetch a URL: renders, escapes, nothing runs, nothing is fetched."""
    run = copy_run(demo_run, tmp_path / "run")
    last = max(int(p.name) for p in (run / "iterations").iterdir())
    (run / "iterations" / f"{last:03d}" / "results.json").unlink()
    (run / "iterations" / f"{last:03d}" / "attribution.json").unlink()
    state = json.loads((run / "loop_state.json").read_text())
    state["finished"] = False
    state["done"][f"{last:03d}"] = []
    (run / "loop_state.json").write_text(json.dumps(state))
    scores = json.loads((run / "scores.json").read_text())
    scores["iterations"] = [s for s in scores["iterations"] if s["iteration"] != last]
    (run / "scores.json").write_text(json.dumps(scores))
    mpath = run / "iterations" / "001" / "evolve" / "manifest.json"
    m = json.loads(mpath.read_text())
    evil = '<script>alert(1)</script><img src="http://198.51.100.7/x.png" onerror="alert(2)">'
    m["changes"][0]["summary"] = evil
    m["changes"][0]["failure_evidence"][0]["task"] = evil
    mpath.write_text(json.dumps(m))
    (run / "transfer.json").write_text(json.dumps({"harness": "best", "rows": [
        {"model": "mock-a", "harness_pass_at_1": 0.75, "baseline_pass_at_1": 0.5, "delta_points": 25.0,
         "ci": [10.0, 40.0], "note": evil}]}))
    out = report_command(run, tmp_path / "out" / "report.html", False)
    html = out.read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html
    r = load_in_chromium(out, tmp_path)
    assert r["dialogs"] == [] and r["exceptions"] == [] and r["console_errors"] == [], r
    assert all(u == out.resolve().as_uri() for u in r["requests"]), r["requests"]
    dom = r["dom"]
    assert dom["scripts"] == 0 and dom["imgs"] == 0
    assert "<script>alert(1)</script>" in dom["text"]  # shown as text
    assert "pending" in dom["text"] and dom["curve"] and dom["transfer"]
    assert any("pending" in c for c in dom["heatmapStates"])
    # evidence links are relative to the report's own folder
    assert dom["evidence"] and all(e.startswith("../run/iterations/001/corpus/") for e in dom["evidence"])


def test_renders_with_almost_nothing(tmp_path: Path) -> None:
    """A run that has just started: only loop_state.json, an empty iteration folder and a
    half-written scores.json."""
    run = tmp_path / "run"
    (run / "iterations" / "001" / "rollouts").mkdir(parents=True)
    (run / "loop_state.json").write_text(json.dumps({"done": {}, "finished": False}))
    (run / "scores.json").write_text('{"iterations": [')  # being written
    out = report_command(run, None, False)
    html = out.read_text()
    assert "pending" in html and 'id="sec-timeline"' in html


def test_not_a_run_folder(tmp_path: Path) -> None:
    from ahe.errors import AheError

    with pytest.raises(AheError, match="no such run folder"):
        report_command(tmp_path / "nope", None, False)
    with pytest.raises(AheError, match="not a run folder"):
        report_command(tmp_path, None, False)
