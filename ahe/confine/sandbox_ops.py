"""The sandbox's exec channel for a confined session: one worker request -> one Sandbox call.

The worker never names a host path: upload and download carry bytes, which the host stages in
a private temporary folder before handing them to the sandbox. Errors go back typed
(remote.py turns them into the exceptions the runtime and tools expect).
"""

from __future__ import annotations

import asyncio
import base64
import errno
import io
import tarfile
from pathlib import Path
from typing import Any

from ahe.confine.wire import error
from ahe.sandbox.base import SandboxError
from ahe.sandbox.local_files import SandboxPathError, extract_untrusted_tar
from ahe.tempdirs import temp_dir


async def serve_sandbox_op(sandbox: Any, op: str, msg: dict[str, Any]) -> dict[str, Any]:
    try:
        return await _run(sandbox, op, msg)
    except SandboxPathError as exc:
        return {"error": error("sandbox_path", str(exc))}
    except SandboxError as exc:
        return {"error": error("sandbox", str(exc))}
    except OSError as exc:
        return {"error": error("os", exc.strerror or str(exc), errno=exc.errno or errno.EIO)}
    except (ValueError, TypeError, KeyError) as exc:
        return {"error": error("value", f"{op}: {exc}")}
    except Exception as exc:  # a backend's own exception type: the tool sees an error, not a crash
        return {"error": error("error", f"{type(exc).__name__}: {exc}")}


def _text(msg: dict[str, Any], key: str) -> str:
    value = msg.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string")
    return value


async def _run(sandbox: Any, op: str, msg: dict[str, Any]) -> dict[str, Any]:
    if op == "exec":
        env = msg.get("env")
        if env is not None and not isinstance(env, dict):
            raise ValueError("env must be an object")
        res = await sandbox.exec(_text(msg, "command"), timeout=msg.get("timeout"), cwd=msg.get("cwd"), env=env,
                                 background=bool(msg.get("background")))
        return {"result": res.model_dump(mode="json")}
    if op == "read_file":
        return {"data": base64.b64encode(await sandbox.read_file(_text(msg, "path"))).decode()}
    if op == "write_file":
        await sandbox.write_file(_text(msg, "path"), base64.b64decode(_text(msg, "data")))
        return {}
    if op == "upload":
        data = base64.b64decode(_text(msg, "data"))
        with temp_dir("confine-upload") as tmp:
            if msg.get("kind") == "tar":
                await asyncio.to_thread(extract_untrusted_tar, data, tmp / "tree")
                await sandbox.upload(tmp / "tree", _text(msg, "remote"))
            else:
                (tmp / "file").write_bytes(data)
                await sandbox.upload(tmp / "file", _text(msg, "remote"))
        return {}
    if op == "download":
        with temp_dir("confine-download") as tmp:
            target = tmp / "item"
            await sandbox.download(_text(msg, "remote"), target)
            if target.is_dir():
                return {"kind": "dir", "data": base64.b64encode(await asyncio.to_thread(_tar, target)).decode()}
            return {"kind": "file", "mode": target.stat().st_mode & 0o777,
                    "data": base64.b64encode(target.read_bytes()).decode()}
    raise ValueError(f"no sandbox operation {op}")


def _tar(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(folder), arcname=".")
    return buf.getvalue()


__all__ = ["serve_sandbox_op"]
