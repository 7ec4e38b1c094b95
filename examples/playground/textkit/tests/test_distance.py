import unittest

from textkit.distance import closest, common_prefix, levenshtein


class LevenshteinTest(unittest.TestCase):
    def test_classic(self):
        self.assertEqual(levenshtein("kitten", "sitting"), 3)
        self.assertEqual(levenshtein("flaw", "lawn"), 2)

    def test_identity_and_empty(self):
        self.assertEqual(levenshtein("same", "same"), 0)
        self.assertEqual(levenshtein("", "abc"), 3)
        self.assertEqual(levenshtein("abc", ""), 3)
        self.assertEqual(levenshtein("", ""), 0)

    def test_symmetric(self):
        for a, b in (("book", "back"), ("a", "ab"), ("intention", "execution")):
            self.assertEqual(levenshtein(a, b), levenshtein(b, a))

    def test_single_edits(self):
        self.assertEqual(levenshtein("cat", "cut"), 1)
        self.assertEqual(levenshtein("cat", "cats"), 1)
        self.assertEqual(levenshtein("cat", "at"), 1)


class ClosestTest(unittest.TestCase):
    def test_nearest_first_then_alphabetical(self):
        """Candidates are ordered by distance, ties by name."""
        words = ["help", "hello", "yellow", "hell", "world"]
        self.assertEqual(closest("helo", words), ["hell", "hello", "help"])

    def test_max_distance(self):
        self.assertEqual(closest("cat", ["bat", "cart", "dog"], max_distance=1), ["bat", "cart"])
        self.assertEqual(closest("cat", ["cat", "bat"], max_distance=0), ["cat"])
        self.assertEqual(closest("helo", ["yellow", "hero"], max_distance=3), ["hero", "yellow"])

    def test_nothing_close(self):
        self.assertEqual(closest("zzz", ["alpha", "beta"]), [])

    def test_negative_distance(self):
        with self.assertRaises(ValueError):
            closest("a", ["a"], max_distance=-1)


class CommonPrefixTest(unittest.TestCase):
    def test_shared(self):
        self.assertEqual(common_prefix(["interval", "internet", "interior"]), "inter")

    def test_none_shared(self):
        self.assertEqual(common_prefix(["dog", "cat"]), "")

    def test_one_is_prefix_of_other(self):
        self.assertEqual(common_prefix(["ab", "abc", "abcd"]), "ab")

    def test_empty_list(self):
        self.assertEqual(common_prefix([]), "")

    def test_single_word(self):
        self.assertEqual(common_prefix(["alone"]), "alone")


if __name__ == "__main__":
    unittest.main()
