import unittest

from gridpath.grid import Grid

MAZE = """
S.#
.##
..E
"""


class GridTest(unittest.TestCase):
    def test_parse(self):
        g = Grid.parse(MAZE)
        self.assertEqual((g.height, g.width), (3, 3))
        self.assertEqual(g.rows[0], "S.#")

    def test_ragged_rows(self):
        with self.assertRaises(ValueError):
            Grid(["..", "..."])

    def test_empty(self):
        with self.assertRaises(ValueError):
            Grid([])

    def test_inside_and_open(self):
        g = Grid.parse(MAZE)
        self.assertTrue(g.inside((2, 2)))
        self.assertFalse(g.inside((3, 0)))
        self.assertFalse(g.inside((0, -1)))
        self.assertFalse(g.is_open((0, 2)))
        self.assertTrue(g.is_open((0, 1)))

    def test_find(self):
        g = Grid.parse(MAZE)
        self.assertEqual(g.find("S"), (0, 0))
        self.assertEqual(g.find("E"), (2, 2))
        self.assertIsNone(g.find("X"))

    def test_neighbors_order(self):
        """Up, down, left, right; walls and the outside are left out."""
        g = Grid(["...", "...", "..."])
        self.assertEqual(g.neighbors((1, 1)), [(0, 1), (2, 1), (1, 0), (1, 2)])
        self.assertEqual(g.neighbors((0, 0)), [(1, 0), (0, 1)])
        self.assertEqual(Grid.parse(MAZE).neighbors((1, 0)), [(0, 0), (2, 0)])


if __name__ == "__main__":
    unittest.main()
