"""textstats: a tiny example project for AHE's SWE-CI tasks."""


def word_count(text):
    return len(text.split())


def char_count(text):
    return len(text)


def line_count(text):
    return len(text.splitlines())


def unique_words(text):
    return sorted(set(w.lower() for w in text.split()))


def top_word(text):
    counts = {}
    for w in text.lower().split():
        counts[w] = counts.get(w, 0) + 1
    return max(sorted(counts), key=lambda w: counts[w])


def average_word_length(text):
    words = text.split()
    return sum(len(w) for w in words) / len(words) if words else 0.0


def longest_word(text):
    return max(text.split(), key=len)


def sentence_count(text):
    import re
    return len([s for s in re.split(r'[.!?]+', text) if s.strip()])
