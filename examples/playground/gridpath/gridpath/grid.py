"""A rectangular grid read from text: '#' is a wall, anything else is open."""


class Grid:
    def __init__(self, rows):
        """`rows` is a list of equally long strings."""
        if not rows:
            raise ValueError("a grid needs at least one row")
        width = len(rows[0])
        for r, row in enumerate(rows):
            if len(row) != width:
                raise ValueError(f"row {r} has {len(row)} cells, expected {width}")
        self.rows = list(rows)
        self.height = len(rows)
        self.width = width

    @classmethod
    def parse(cls, text):
        """Blank lines around the grid are ignored."""
        return cls([line for line in text.strip("\n").split("\n") if line.strip()])

    def inside(self, cell):
        r, c = cell
        return 0 <= r < self.height and 0 <= c < self.width

    def is_open(self, cell):
        return self.inside(cell) and self.rows[cell[0]][cell[1]] != "#"

    def find(self, symbol):
        """The first cell holding `symbol`, row by row; None when absent."""
        for r, row in enumerate(self.rows):
            c = row.find(symbol)
            if c >= 0:
                return (r, c)
        return None

    def neighbors(self, cell):
        """Open cells up, down, left and right of `cell`, in that order."""
        r, c = cell
        out = []
        for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            nxt = (r + dr, c + dc)
            if self.is_open(nxt):
                out.append(nxt)
        return out
