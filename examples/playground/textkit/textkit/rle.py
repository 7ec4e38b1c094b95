"""Run-length encoding of text: "aaab" <-> "3a1b"."""


def encode(text):
    """Encode `text` as runs of <count><char>; the empty string encodes to ""."""
    if not isinstance(text, str):
        raise TypeError("encode() takes a string")
    if any(ch.isdigit() for ch in text):
        raise ValueError("digits cannot be run-length encoded")
    out = []
    i = 0
    while i < len(text):
        j = i
        while j < len(text) and text[j] == text[i]:
            j += 1
        out.append(f"{j - i}{text[i]}")
        i = j
    return "".join(out)


def decode(data):
    """Invert `encode`; a count without a character, or a character without a count, is an error."""
    out = []
    count = ""
    for ch in data:
        if ch.isdigit():
            count += ch
            continue
        if not count:
            raise ValueError(f"character {ch!r} has no count")
        if int(count) == 0:
            raise ValueError("a run cannot be empty")
        out.append(ch * int(count))
        count = ""
    if count:
        raise ValueError("trailing count without a character")
    return "".join(out)
