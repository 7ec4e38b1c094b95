import unittest

from gridpath.grid import Grid
from gridpath.search import distance, regions, shortest_path

MAZE = Grid.parse("""
S.#.
.##.
....
#..E
""")


class ShortestPathTest(unittest.TestCase):
    def test_path(self):
        path = shortest_path(MAZE, (0, 0), (3, 3))
        self.assertEqual(path[0], (0, 0))
        self.assertEqual(path[-1], (3, 3))
        self.assertEqual(len(path), 7)
        for a, b in zip(path, path[1:]):
            self.assertEqual(abs(a[0] - b[0]) + abs(a[1] - b[1]), 1)

    def test_same_cell(self):
        self.assertEqual(shortest_path(MAZE, (2, 2), (2, 2)), [(2, 2)])

    def test_unreachable(self):
        g = Grid([".#."])
        self.assertIsNone(shortest_path(g, (0, 0), (0, 2)))

    def test_wall_is_refused(self):
        with self.assertRaises(ValueError):
            shortest_path(MAZE, (0, 2), (3, 3))
        with self.assertRaises(ValueError):
            shortest_path(MAZE, (0, 0), (9, 9))

    def test_distance(self):
        self.assertEqual(distance(MAZE, (0, 0), (3, 3)), 6)
        self.assertEqual(distance(MAZE, (0, 3), (1, 3)), 1)
        self.assertEqual(distance(Grid([".#."]), (0, 0), (0, 2)), -1)


class RegionsTest(unittest.TestCase):
    def test_sizes_largest_first(self):
        g = Grid(["..#.", "..#.", "##.#"])
        self.assertEqual(regions(g), [4, 2, 1])

    def test_all_walls(self):
        self.assertEqual(regions(Grid(["##"])), [])

    def test_one_region(self):
        self.assertEqual(regions(MAZE), [12])


if __name__ == "__main__":
    unittest.main()
