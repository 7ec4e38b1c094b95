"""Word statistics of a text."""

import re

_WORD = re.compile(r"[a-z0-9']+")


def words(text):
    """The lower-cased words of `text` (letters, digits and apostrophes)."""
    return [w.strip("'") for w in _WORD.findall(text.lower()) if w.strip("'")]


def word_counts(text):
    """{word: occurrences}."""
    counts = {}
    for w in words(text):
        counts[w] = counts.get(w, 0) + 1
    return counts


def top_words(text, n):
    """The `n` most frequent words as (word, count), most frequent first, ties alphabetically."""
    if n < 0:
        raise ValueError("n cannot be negative")
    ranked = sorted(word_counts(text).items(), key=lambda item: (-item[1], item[0]))
    return ranked[:n]


def sentences(text):
    """Split at '.', '!' or '?' followed by whitespace or the end; empty pieces are dropped."""
    parts = re.split(r"(?<=[.!?])\s+", text.strip())
    return [p for p in parts if p]


def summary(text):
    """{"words", "unique", "sentences", "longest"} of a text; "longest" is the first longest word."""
    ws = words(text)
    longest = ""
    for w in ws:
        if len(w) > len(longest):
            longest = w
    return {"words": len(ws), "unique": len(set(ws)), "sentences": len(sentences(text)),
            "longest": longest}
