"""Edit distance and the suggestions built on it."""


def levenshtein(a, b):
    """The number of single-character insertions, deletions and substitutions from a to b."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            cost = 0 if ca == cb else 1
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost))
        previous = current
    return previous[-1]


def closest(word, candidates, max_distance=2):
    """The candidates within `max_distance` of `word`, nearest first, ties alphabetically."""
    if max_distance < 0:
        raise ValueError("max_distance cannot be negative")
    scored = []
    for candidate in candidates:
        d = levenshtein(word, candidate)
        if d <= max_distance:
            scored.append((d, candidate))
    scored.sort()
    return [candidate for _, candidate in scored]


def common_prefix(words):
    """The longest prefix shared by all `words` ("" for no words)."""
    if not words:
        return ""
    prefix = min(words)
    last = max(words)
    n = 0
    while n < len(prefix) and n < len(last) and prefix[n] == last[n]:
        n += 1
    return prefix[:n]
