"""The worker's one way out: newline-delimited JSON over the trial's unix socket.

Kept free of heavy imports: the worker imports it before anything else. Every request from the
worker carries an `id`; the host answers each with the same `id` and either a result or an
`error` object ({"type", "message", ...}) that the worker turns back into the exception the
runtime expects (see remote.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

# One message may carry a file or a whole conversation; beyond this the peer is misbehaving.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
SOCKET_NAME = "gateway.sock"
JAIL_SOCKET_DIR = "/run/ahe"


def encode(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or None at end of stream. A line that is not a JSON object raises ValueError."""
    line = await reader.readline()
    if not line:
        return None
    msg = json.loads(line)
    if not isinstance(msg, dict):
        raise ValueError("a message must be a JSON object")
    return msg


def error(type_: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "message": message, **extra}
