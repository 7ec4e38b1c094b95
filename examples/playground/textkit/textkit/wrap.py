"""Greedy word wrapping and full justification."""


def wrap(text, width):
    """Split `text` into lines of at most `width` characters, breaking at spaces.

    A word longer than `width` gets a line of its own (it is never cut).
    """
    if width < 1:
        raise ValueError("width must be at least 1")
    lines = []
    current = ""
    for word in text.split():
        if not current:
            current = word
        elif len(current) + 1 + len(word) <= width:
            current = current + " " + word
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    return lines


def justify(line, width):
    """Pad the gaps of `line` with spaces so it is exactly `width` long; leftmost gaps get more."""
    words = line.split()
    if not words:
        return " " * width
    length = sum(len(w) for w in words)
    if length + len(words) - 1 > width:
        raise ValueError("line is longer than width")
    if len(words) == 1:
        return words[0].ljust(width)
    gaps = len(words) - 1
    spaces, extra = divmod(width - length, gaps)
    out = []
    for i, word in enumerate(words[:-1]):
        out.append(word)
        out.append(" " * (spaces + (1 if i < extra else 0)))
    out.append(words[-1])
    return "".join(out)


def fill(text, width):
    """Wrap `text` and justify every line except the last, which stays left-aligned."""
    lines = wrap(text, width)
    if not lines:
        return []
    return [justify(line, width) for line in lines[:-1]] + [lines[-1]]
