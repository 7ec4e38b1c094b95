#!/bin/bash
set -euo pipefail
mkdir -p /app/data
cat > /app/kvserver.py <<'PY'
#!/usr/bin/env python3
"""Key-value HTTP service on 127.0.0.1:8765, persisted to /app/data/store.json."""
import base64
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STORE = "/app/data/store.json"
SEED = "/app/seed.json"
KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
LOCK = threading.Lock()


def load():
    if os.path.exists(STORE):
        with open(STORE) as f:
            return {k: base64.b64decode(v) for k, v in json.load(f).items()}
    with open(SEED, encoding="utf-8") as f:
        return {k: v.encode("utf-8") for k, v in json.load(f).items()}


def save(data):
    os.makedirs(os.path.dirname(STORE), exist_ok=True)
    tmp = STORE + ".tmp"
    with open(tmp, "w") as f:
        json.dump({k: base64.b64encode(v).decode() for k, v in data.items()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, STORE)


DATA = load()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, body=b"", ctype="text/plain"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def key(self):
        if not self.path.startswith("/kv/"):
            return None
        k = self.path[4:]
        return k if KEY.fullmatch(k) else ""

    def do_GET(self):
        if self.path == "/health":
            return self.reply(200, b"ok")
        if self.path == "/kv":
            with LOCK:
                keys = sorted(DATA)
            return self.reply(200, json.dumps(keys).encode(), "application/json")
        k = self.key()
        if k is None:
            return self.reply(404)
        if k == "":
            return self.reply(400)
        with LOCK:
            v = DATA.get(k)
        if v is None:
            return self.reply(404)
        return self.reply(200, v, "application/octet-stream")

    def do_PUT(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        k = self.key()
        if k is None:
            return self.reply(404)
        if k == "":
            return self.reply(400)
        with LOCK:
            existed = k in DATA
            DATA[k] = body
            save(DATA)
        return self.reply(200 if existed else 201)

    def do_DELETE(self):
        k = self.key()
        if k is None:
            return self.reply(404)
        if k == "":
            return self.reply(400)
        with LOCK:
            if k not in DATA:
                return self.reply(404)
            del DATA[k]
            save(DATA)
        return self.reply(204)

    def do_POST(self):
        self.reply(404)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


if __name__ == "__main__":
    Server(("127.0.0.1", 8765), Handler).serve_forever()
PY
cd /app
setsid nohup python3 /app/kvserver.py > /app/kv.log 2>&1 < /dev/null &
echo $! > /app/kv.pid
for i in $(seq 50); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/health', timeout=1)" 2>/dev/null && break
  sleep 0.1
done
python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8765/kv', timeout=2).read())"
# The grader starts the service itself: stop this one and leave only the seed data.
kill "$(cat /app/kv.pid)"
rm -f /app/kv.pid /app/data/store.json
