"""Small text helpers for the corpus files: fences, one-line summaries, argument display."""

from __future__ import annotations

import json
import re
from typing import Any


def fence(text: str, lang: str = "text") -> str:
    """A tilde fence longer than any run of tildes in `text` (backticks are common in content)."""
    f = "~~~"
    while f in text:
        f += "~"
    return f"{f}{lang}\n{text}\n{f}"


def one_line(text: str, limit: int = 120) -> str:
    """The start of `text` on one line, whitespace collapsed, cut at `limit` with an ellipsis."""
    if not text:
        return ""
    flat = " ".join(text[: limit * 3].split())
    if len(flat) > limit:
        return flat[: limit - 1] + "…"
    if len(text) > limit * 3:
        return flat + " …"
    return flat


def args_text(arguments: Any) -> str:
    """Tool-call arguments as compact JSON (a string stays as it is)."""
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, ensure_ascii=False, separators=(", ", ": "))
    except (TypeError, ValueError):
        return str(arguments)


COMMAND_KEYS = ("command", "cmd", "keystrokes", "script")


def command_key(arguments: dict[str, Any]) -> str | None:
    """The argument holding a shell command, when the tool takes one (`command`, `cmd`, `keystrokes`, `script`)."""
    for k in COMMAND_KEYS:
        if isinstance(arguments.get(k), str):
            return k
    return None


def call_summary(name: str, arguments: Any, limit: int = 100) -> str:
    """`tool cmd` for shell-like tools (a `command` argument), else `tool {json}`; one line."""
    if isinstance(arguments, dict):
        key = command_key(arguments)
        if key:
            return f"{name}: {one_line(arguments[key], limit)}"
        if "_raw" in arguments and len(arguments) == 1:
            return f"{name}: (unparsed arguments) {one_line(str(arguments['_raw']), limit)}"
    return f"{name} {one_line(args_text(arguments), limit)}"


def content_text(content: Any) -> tuple[str, int]:
    """Text of a message/observation content: a string, or a list of parts; (text, parts dropped)."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if isinstance(content, list):
        texts, dropped = [], 0
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif part.get("type") in ("image", "image_url", "input_image", "audio", "input_audio", "file"):
                    dropped += 1
                    texts.append(f"[{part.get('type')} part dropped]")
                else:
                    texts.append(args_text(part))
            else:
                texts.append(str(part))
        return "\n".join(texts), dropped
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return content["text"], 0
        return args_text(content), 0
    return str(content), 0


def natural_key(name: str) -> tuple:
    """trial-2 before trial-10."""
    out: list[Any] = []
    num = ""
    word = ""
    for ch in name:
        if ch.isdigit():
            if word:
                out.append((1, word))
                word = ""
            num += ch
        else:
            if num:
                out.append((0, int(num)))
                num = ""
            word += ch
    if num:
        out.append((0, int(num)))
    if word:
        out.append((1, word))
    return tuple(out)


def safe_name(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")
    s = s or "trace"
    return ("x" + s) if s.startswith("_") else s
