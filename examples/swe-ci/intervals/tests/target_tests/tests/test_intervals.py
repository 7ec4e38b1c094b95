import unittest

import intervals as t


class TestIntervals(unittest.TestCase):
    def test_merge(self):
        self.assertEqual(t.merge([(3, 5), (1, 4)]), [(1, 5)])

    def test_overlaps(self):
        self.assertTrue(t.overlaps((1, 3), (2, 4)))

    def test_length(self):
        self.assertEqual(t.length([(1, 3), (2, 6)]), 5)

    def test_intersect(self):
        self.assertEqual(t.intersect((1, 4), (3, 9)), (3, 4))

    def test_contains(self):
        self.assertTrue(t.contains((1, 4), 1))

    def test_gaps(self):
        self.assertEqual(t.gaps([(1, 2), (4, 5)]), [(2, 4)])

    def test_clamp(self):
        self.assertEqual(t.clamp((0, 10), 2, 5), (2, 5))

    def test_split_at(self):
        self.assertEqual(t.split_at((0, 4), 1), [(0, 1), (1, 4)])

