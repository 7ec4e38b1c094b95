"""Errors shared across AHE.

`AheError` is for bad input: its message is one sentence that names the file, field or flag
and says what to do; the CLI prints it without a traceback. `InfrastructureError` marks a
failure of the world around the agent (model endpoint, sandbox), never the agent's own fault:
rollouts count it apart and may retry it.
"""


class AheError(Exception):
    """Bad input or configuration; the message is meant for the user as is."""


class UnconfinedWarning(RuntimeWarning):
    """Code runs without a sandbox or jail. Logged once per process and raised through `warnings`
    (what tests and library callers catch); the CLI leaves the `warnings` copy out, as the log says it."""


class ConfigError(AheError):
    """A file the user wrote (agent.yaml, a policy, a task, a config) is invalid."""


class InfrastructureError(Exception):
    """The model endpoint or the sandbox failed in a way the agent could not cause or fix."""

    def __init__(self, message: str, *, kind: str = "infrastructure") -> None:
        super().__init__(message)
        self.kind = kind


class ContextLengthError(InfrastructureError):
    """The endpoint refused the request because the conversation is too long for the model."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind="context_length")


def disk_error_sentence(exc: OSError, folder: object = None) -> str | None:
    """One sentence for a full disk or quota (what the user can fix), None for any other OSError."""
    import errno

    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        return None
    target = exc.filename or folder
    where = f" writing {target}" if target else ""
    return (f"no space left on the device{where} ({exc.strerror}); free some space and run the same command "
            "again (or `ahe evolve --resume RUN_DIR`): finished trials are kept and are not run again.")


class DiskFullError(AheError):
    """A full disk under the output folder: one sentence, exit like any bad input."""


def raise_if_disk_full(exc: OSError, folder: object) -> None:
    """Re-raise a full-disk OSError as a DiskFullError naming the output folder."""
    sentence = disk_error_sentence(exc, folder)
    if sentence is not None:
        raise DiskFullError(sentence) from None
