import unittest

from textkit.rle import decode, encode


class EncodeTest(unittest.TestCase):
    def test_runs_are_counted(self):
        """Consecutive equal characters become one count and the character."""
        self.assertEqual(encode("aaabcc"), "3a1b2c")

    def test_single_characters(self):
        self.assertEqual(encode("abc"), "1a1b1c")

    def test_long_run(self):
        self.assertEqual(encode("x" * 12), "12x")

    def test_empty(self):
        self.assertEqual(encode(""), "")

    def test_spaces_are_characters(self):
        self.assertEqual(encode("a  b"), "1a2 1b")

    def test_digits_are_refused(self):
        with self.assertRaises(ValueError):
            encode("a1")

    def test_non_string_is_refused(self):
        with self.assertRaises(TypeError):
            encode(["a"])


class DecodeTest(unittest.TestCase):
    def test_round_trip(self):
        for text in ("", "a", "aaabcc", "zzzzzzzzzzzzy", "hello  world"):
            self.assertEqual(decode(encode(text)), text)

    def test_multi_digit_count(self):
        self.assertEqual(decode("10a2b"), "a" * 10 + "bb")

    def test_missing_count(self):
        with self.assertRaises(ValueError):
            decode("3ab")

    def test_trailing_count(self):
        with self.assertRaises(ValueError):
            decode("3a4")

    def test_zero_count(self):
        with self.assertRaises(ValueError):
            decode("0a")


if __name__ == "__main__":
    unittest.main()
