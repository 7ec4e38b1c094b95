import unittest

from textkit.wrap import wrap


class WrapTest(unittest.TestCase):
    def test_greedy(self):
        """Each line takes as many words as fit."""
        self.assertEqual(wrap("the quick brown fox jumps", 10), ["the quick", "brown fox", "jumps"])

    def test_exact_fit(self):
        self.assertEqual(wrap("abc def", 7), ["abc def"])

    def test_one_short(self):
        self.assertEqual(wrap("abc def", 6), ["abc", "def"])

    def test_long_word_alone(self):
        self.assertEqual(wrap("a supercalifragilistic b", 5), ["a", "supercalifragilistic", "b"])

    def test_whitespace_collapses(self):
        self.assertEqual(wrap("  a \n b\t\tc  ", 80), ["a b c"])

    def test_empty(self):
        self.assertEqual(wrap("", 10), [])
        self.assertEqual(wrap("   ", 10), [])

    def test_width_one(self):
        self.assertEqual(wrap("a b", 1), ["a", "b"])

    def test_bad_width(self):
        with self.assertRaises(ValueError):
            wrap("a", 0)


if __name__ == "__main__":
    unittest.main()
