"""The tiny projects behind the bundled SWE-CI examples: their commits and the mock's rounds.

Each project is a module built from named functions. A commit (or a mock Programmer round)
is a list of function versions; `render` turns it into the module's text. The tests are
stdlib `unittest` and live in tests/.
"""

from __future__ import annotations

# ---------------------------------------------------------------- textstats
TEXTSTATS = {
    "word_count": "def word_count(text):\n    return len(text.split())\n",
    "char_count": "def char_count(text):\n    return len(text)\n",
    "char_count_bad": "def char_count(text):\n    return len(text.replace(' ', ''))\n",
    "line_count": "def line_count(text):\n    return len(text.splitlines())\n",
    "unique_words": "def unique_words(text):\n    return sorted(set(w.lower() for w in text.split()))\n",
    "top_word": ("def top_word(text):\n    counts = {}\n    for w in text.lower().split():\n"
                 "        counts[w] = counts.get(w, 0) + 1\n    return max(sorted(counts), key=lambda w: counts[w])\n"),
    "average_word_length": ("def average_word_length(text):\n    words = text.split()\n"
                            "    return sum(len(w) for w in words) / len(words) if words else 0.0\n"),
    "longest_word": "def longest_word(text):\n    return max(text.split(), key=len)\n",
    "sentence_count": ("def sentence_count(text):\n    import re\n"
                       "    return len([s for s in re.split(r'[.!?]+', text) if s.strip()])\n"),
}
TEXTSTATS_TESTS = {
    "word_count": "self.assertEqual(t.word_count('a b  c'), 3)",
    "char_count": "self.assertEqual(t.char_count('ab c'), 4)",
    "line_count": "self.assertEqual(t.line_count('a\\nb\\nc'), 3)",
    "unique_words": "self.assertEqual(t.unique_words('b a B'), ['a', 'b'])",
    "top_word": "self.assertEqual(t.top_word('x y y z'), 'y')",
    "average_word_length": "self.assertEqual(t.average_word_length('ab abcd'), 3.0)",
    "longest_word": "self.assertEqual(t.longest_word('a abc ab'), 'abc')",
    "sentence_count": "self.assertEqual(t.sentence_count('Hi. Yes! No?'), 3)",
}

# ---------------------------------------------------------------- intervals
INTERVALS = {
    "merge": ("def merge(items):\n    out = []\n    for a, b in sorted(items):\n"
              "        if out and a <= out[-1][1]:\n            out[-1] = (out[-1][0], max(out[-1][1], b))\n"
              "        else:\n            out.append((a, b))\n    return out\n"),
    "overlaps": "def overlaps(x, y):\n    return x[0] < y[1] and y[0] < x[1]\n",
    "length": "def length(items):\n    return sum(b - a for a, b in merge(items))\n",
    "intersect": ("def intersect(x, y):\n    a, b = max(x[0], y[0]), min(x[1], y[1])\n"
                  "    return (a, b) if a < b else None\n"),
    "contains": "def contains(x, point):\n    return x[0] <= point < x[1]\n",
    "gaps": ("def gaps(items):\n    m = merge(items)\n"
             "    return [(m[i][1], m[i + 1][0]) for i in range(len(m) - 1)]\n"),
    "clamp": "def clamp(x, lo, hi):\n    return (max(x[0], lo), min(x[1], hi))\n",
    "split_at": "def split_at(x, point):\n    return [(x[0], point), (point, x[1])] if contains(x, point) else [x]\n",
}
INTERVALS_TESTS = {
    "merge": "self.assertEqual(t.merge([(3, 5), (1, 4)]), [(1, 5)])",
    "overlaps": "self.assertTrue(t.overlaps((1, 3), (2, 4)))",
    "length": "self.assertEqual(t.length([(1, 3), (2, 6)]), 5)",
    "intersect": "self.assertEqual(t.intersect((1, 4), (3, 9)), (3, 4))",
    "contains": "self.assertTrue(t.contains((1, 4), 1))",
    "gaps": "self.assertEqual(t.gaps([(1, 2), (4, 5)]), [(2, 4)])",
    "clamp": "self.assertEqual(t.clamp((0, 10), 2, 5), (2, 5))",
    "split_at": "self.assertEqual(t.split_at((0, 4), 1), [(0, 1), (1, 4)])",
}

# ---------------------------------------------------------------- units
UNITS = {
    "to_meters": "def to_meters(feet):\n    return round(feet * 0.3048, 4)\n",
    "to_feet": "def to_feet(meters):\n    return round(meters / 0.3048, 4)\n",
    "to_feet_bad": "def to_feet(meters):\n    return round(meters * 0.3048, 4)\n",
    "to_inches": "def to_inches(meters):\n    return round(meters / 0.0254, 4)\n",
    "to_km": "def to_km(meters):\n    return meters / 1000\n",
    "to_miles": "def to_miles(meters):\n    return round(meters / 1609.344, 4)\n",
    "parse": ("def parse(text):\n    value, unit = text.split()\n"
              "    return float(value) * {'m': 1.0, 'km': 1000.0, 'ft': 0.3048}[unit]\n"),
    "describe": "def describe(meters):\n    return f'{meters:g} m'\n",
}
UNITS_TESTS = {
    "to_meters": "self.assertEqual(t.to_meters(10), 3.048)",
    "to_feet": "self.assertEqual(t.to_feet(3.048), 10.0)",
    "to_inches": "self.assertEqual(t.to_inches(0.0254), 1.0)",
    "to_km": "self.assertEqual(t.to_km(1500), 1.5)",
    "to_miles": "self.assertEqual(t.to_miles(1609.344), 1.0)",
    "parse": "self.assertEqual(t.parse('2 km'), 2000.0)",
    "describe": "self.assertEqual(t.describe(2.5), '2.5 m')",
}

# The lesson the evolve mock adds to the harness's memory; with it the mock Programmer leaves
# out the regressing hunk (so EvoScore rises while the pass rate of `units` stays 0).
LESSON = "- In a CI round, run the whole test suite before you finish, and keep every test that passed passing.\n"
CAREFUL_ROUNDS = {  # project -> {round: functions} the Programmer writes when the lesson is in memory
    "textstats": {1: ["word_count", "char_count", "line_count", "unique_words", "top_word", "average_word_length",
                      "longest_word", "sentence_count"]},
    "units": {2: ["to_meters", "to_feet", "to_inches", "to_km", "to_miles"]},
}

# name -> (module name, functions, tests, commits (function lists), mock rounds (function lists))
PROJECTS = {
    "textstats": ("textstats", TEXTSTATS, TEXTSTATS_TESTS, [
        ["word_count", "char_count"],
        ["word_count", "char_count", "line_count"],
        ["word_count", "char_count", "line_count", "unique_words", "top_word", "average_word_length",
         "longest_word", "sentence_count"],
    ], [
        ["word_count", "char_count_bad", "line_count", "unique_words", "top_word"],
        ["word_count", "char_count", "line_count", "unique_words", "top_word", "average_word_length",
         "longest_word", "sentence_count"],
    ]),
    "intervals": ("intervals", INTERVALS, INTERVALS_TESTS, [
        ["merge", "overlaps"],
        ["merge", "overlaps", "length"],
        ["merge", "overlaps", "length", "intersect", "contains", "gaps", "clamp", "split_at"],
    ], [
        ["merge", "overlaps", "length", "intersect", "contains", "gaps", "clamp", "split_at"],
    ]),
    "units": ("units", UNITS, UNITS_TESTS, [
        ["to_meters"],
        ["to_meters", "to_feet"],
        ["to_meters", "to_feet", "to_inches", "to_km", "to_miles", "parse", "describe"],
    ], [
        ["to_meters", "to_feet", "to_inches", "to_km"],
        ["to_meters", "to_feet_bad", "to_inches", "to_km", "to_miles"],
        ["to_meters", "to_feet", "to_inches", "to_km", "to_miles", "parse"],
    ]),
}


def render(functions: dict[str, str], names: list[str], module: str) -> str:
    """The module's text for one list of function versions."""
    return f'"""{module}: a tiny example project for AHE\'s SWE-CI tasks."""\n\n\n' + "\n\n".join(functions[n] for n in names)


def render_tests(tests: dict[str, str], names: list[str], module: str) -> str:
    """The unittest file testing the functions in `names` (a `_bad` version tests as its base)."""
    body = "".join(f"    def test_{n}(self):\n        {tests[n]}\n\n" for n in names if n in tests)
    return f"import unittest\n\nimport {module} as t\n\n\nclass Test{module.title()}(unittest.TestCase):\n{body}"
