import unittest

import textstats as t


class TestTextstats(unittest.TestCase):
    def test_word_count(self):
        self.assertEqual(t.word_count('a b  c'), 3)

    def test_char_count(self):
        self.assertEqual(t.char_count('ab c'), 4)

    def test_line_count(self):
        self.assertEqual(t.line_count('a\nb\nc'), 3)

    def test_unique_words(self):
        self.assertEqual(t.unique_words('b a B'), ['a', 'b'])

    def test_top_word(self):
        self.assertEqual(t.top_word('x y y z'), 'y')

    def test_average_word_length(self):
        self.assertEqual(t.average_word_length('ab abcd'), 3.0)

    def test_longest_word(self):
        self.assertEqual(t.longest_word('a abc ab'), 'abc')

    def test_sentence_count(self):
        self.assertEqual(t.sentence_count('Hi. Yes! No?'), 3)

