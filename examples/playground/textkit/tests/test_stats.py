import unittest

from textkit.stats import sentences, summary, top_words, word_counts, words


class WordsTest(unittest.TestCase):
    def test_lower_case_and_punctuation(self):
        self.assertEqual(words("Hello, hello! It's 2 o'clock."), ["hello", "hello", "it's", "2", "o'clock"])

    def test_quotes_are_stripped(self):
        self.assertEqual(words("'quoted' words"), ["quoted", "words"])

    def test_counts(self):
        self.assertEqual(word_counts("a b a C c c"), {"a": 2, "b": 1, "c": 3})


class TopWordsTest(unittest.TestCase):
    def test_most_frequent_first(self):
        """Ties are broken alphabetically."""
        text = "b a c b a b d"
        self.assertEqual(top_words(text, 3), [("b", 3), ("a", 2), ("c", 1)])

    def test_n_larger_than_vocabulary(self):
        self.assertEqual(top_words("x y", 10), [("x", 1), ("y", 1)])

    def test_zero(self):
        self.assertEqual(top_words("x y", 0), [])

    def test_negative(self):
        with self.assertRaises(ValueError):
            top_words("x", -1)


class SentencesTest(unittest.TestCase):
    def test_split(self):
        self.assertEqual(sentences("One. Two! Three? Four"), ["One.", "Two!", "Three?", "Four"])

    def test_no_split_inside_words(self):
        self.assertEqual(sentences("Version 1.5 is out."), ["Version 1.5 is out."])

    def test_blank(self):
        self.assertEqual(sentences("   "), [])


class SummaryTest(unittest.TestCase):
    def test_summary(self):
        text = "The cat sat. The elephant sat too!"
        self.assertEqual(summary(text), {"words": 7, "unique": 5, "sentences": 2, "longest": "elephant"})

    def test_first_longest_wins(self):
        self.assertEqual(summary("abc xyz ab")["longest"], "abc")

    def test_empty(self):
        self.assertEqual(summary(""), {"words": 0, "unique": 0, "sentences": 0, "longest": ""})


if __name__ == "__main__":
    unittest.main()
