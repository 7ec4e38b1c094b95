"""textstats: a tiny example project for AHE's SWE-CI tasks."""


def word_count(text):
    return len(text.split())


def char_count(text):
    return len(text)
