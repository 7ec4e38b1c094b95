"""Headless Chromium for the report tests, driven over the DevTools protocol on
`--remote-debugging-pipe` (fds 3/4, NUL-terminated JSON) with the standard library only: it records
every console message, exception, dialog and network request of a page, probes the DOM, and can save
a screenshot under test-artifacts/ (git-ignored). Needs Debian's `chromium` package; the tests that
use it are skipped with that reason if it is absent (failed instead under AHE_REQUIRE_CHROMIUM=1).
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

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# CI sets AHE_REQUIRE_CHROMIUM=1: there a missing browser must fail the tests, not skip them.
_REQUIRE = os.environ.get("AHE_REQUIRE_CHROMIUM") == "1"
needs_chromium = pytest.mark.skipif(CHROMIUM is None and not _REQUIRE,
                                    reason="Debian's `chromium` is not installed (apt-get install -y chromium)")


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


def assert_inert(r: dict, page: Path) -> None:
    """What `load_in_chromium` saw of a page holding hostile text: nothing ran (no dialog, exception or
    console error), nothing was fetched but the file itself, and no script or img element exists."""
    assert r["dialogs"] == [] and r["exceptions"] == [] and r["console_errors"] == [], r
    assert all(u == page.resolve().as_uri() for u in r["requests"]), r["requests"]
    assert r["dom"]["scripts"] == 0 and r["dom"]["imgs"] == 0, (r["dom"]["scripts"], r["dom"]["imgs"])
