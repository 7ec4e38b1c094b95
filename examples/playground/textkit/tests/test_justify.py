import unittest

from textkit.wrap import fill, justify


class JustifyTest(unittest.TestCase):
    def test_even_gaps(self):
        self.assertEqual(justify("a b c", 9), "a   b   c")

    def test_left_gaps_get_extra(self):
        """Spare spaces go to the leftmost gaps first."""
        self.assertEqual(justify("a b c", 8), "a   b  c")
        self.assertEqual(justify("aa b c d", 12), "aa   b  c  d")

    def test_already_full(self):
        self.assertEqual(justify("ab cd", 5), "ab cd")

    def test_single_word_is_left_aligned(self):
        self.assertEqual(justify("word", 7), "word   ")

    def test_blank_line(self):
        self.assertEqual(justify("", 3), "   ")

    def test_too_long(self):
        with self.assertRaises(ValueError):
            justify("abc def", 6)

    def test_every_result_has_the_width(self):
        for width in range(7, 20):
            self.assertEqual(len(justify("one two", width)), width)


class FillTest(unittest.TestCase):
    def test_last_line_left_aligned(self):
        self.assertEqual(fill("the quick brown fox jumps", 10), ["the  quick", "brown  fox", "jumps"])

    def test_single_line(self):
        self.assertEqual(fill("short text", 40), ["short text"])

    def test_empty(self):
        self.assertEqual(fill("", 5), [])


if __name__ == "__main__":
    unittest.main()
