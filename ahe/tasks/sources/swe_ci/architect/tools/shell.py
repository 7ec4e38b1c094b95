"""The Architect's only tool: run a bash command in the trial's sandbox (to read code and run tests)."""

from ahe.sandbox.output import truncate_head_tail

OUTPUT_LIMIT = 12000


async def run_shell_command(command: str, timeout: int = 120, *, sandbox):
    result = await sandbox.exec(command, timeout=float(timeout))
    parts = []
    if result.timed_out:
        parts.append(
            f"timed out after {timeout}s and was killed (use a larger timeout)"
        )
    parts.append(f"exit code: {result.exit_code}")
    if result.stdout:
        parts.append(truncate_head_tail(result.stdout, OUTPUT_LIMIT, result.stdout_path))
    if result.stderr:
        parts.append("[stderr]\n" + truncate_head_tail(result.stderr, OUTPUT_LIMIT // 2, result.stderr_path))
    return "\n".join(parts)
