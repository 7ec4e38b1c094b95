"""Breadth-first search: shortest paths and connected regions."""

from collections import deque


def shortest_path(grid, start, goal):
    """The cells of a shortest path from start to goal (both included), or None."""
    if not grid.is_open(start) or not grid.is_open(goal):
        raise ValueError("start and goal must be open cells")
    previous = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            path = []
            while cell is not None:
                path.append(cell)
                cell = previous[cell]
            return path[::-1]
        for nxt in grid.neighbors(cell):
            if nxt not in previous:
                previous[nxt] = cell
                queue.append(nxt)
    return None


def distance(grid, start, goal):
    """Steps of a shortest path, or -1 when the goal cannot be reached."""
    path = shortest_path(grid, start, goal)
    return -1 if path is None else len(path) - 1


def regions(grid):
    """Sizes of the connected open regions, largest first."""
    seen = set()
    sizes = []
    for r in range(grid.height):
        for c in range(grid.width):
            if (r, c) in seen or not grid.is_open((r, c)):
                continue
            size = 0
            stack = [(r, c)]
            seen.add((r, c))
            while stack:
                cell = stack.pop()
                size += 1
                for nxt in grid.neighbors(cell):
                    if nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)
            sizes.append(size)
    return sorted(sizes, reverse=True)
