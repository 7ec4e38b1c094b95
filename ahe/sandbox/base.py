"""The Sandbox protocol (DESIGN.md §5) and the types every backend shares."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel

from ahe.errors import InfrastructureError


class SandboxError(InfrastructureError):
    """The sandbox itself failed (could not start, died, lost a file) — not the command."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="sandbox")


class ExecResult(BaseModel):
    """What one command did. stdout/stderr are complete; the tools truncate for the model."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    duration_sec: float = 0.0
    background: bool = False
    # Paths of the files holding this command's full output, as seen inside the sandbox (so the
    # agent can page through them); host paths in the local backend's no-isolation fallback.
    stdout_path: str | None = None
    stderr_path: str | None = None


# Where a host folder shared with the sandbox appears inside it when the sandbox has no private
# /tmp of its own on the host (docker): the model gateway's socket is reached through it.
CHANNEL_DIR = "/run/ahe-channel"


class Mount(BaseModel):
    """A host folder made visible inside the sandbox at `target`."""

    source: Path
    target: str
    writable: bool = False


@runtime_checkable
class Sandbox(Protocol):
    """One isolated machine for one trial; persistent between `exec` calls until `stop`."""

    async def start(self) -> None: ...

    async def exec(
        self,
        command: str,
        *,
        timeout: float,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        background: bool = False,
    ) -> ExecResult: ...

    async def read_file(self, path: str) -> bytes: ...

    async def write_file(self, path: str, data: bytes) -> None: ...

    async def upload(self, local: Path, remote: str) -> None: ...

    async def download(self, remote: str, local: Path) -> None: ...

    async def stop(self) -> None: ...
