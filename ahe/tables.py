"""A command's tables in three forms: the terminal (`table`), Markdown pipe tables, or JSON.

Commands build ordinary rich `Table`s and hand them, with the lines of text between them, to
a `TableOutput` (it prints like a `Console`). Rich alone squeezes a table too wide for the
screen column by column and cuts headers to "varia…"; `fit` instead keeps every header word
whole: the table as drawn, else without vertical rules, else less the columns that hold one
value in every row and then less the columns the command marked `optional` (both named under
the table), else one block of `header  value` lines per row. Markdown reads the same tables
back (rich keeps each column's cells) into pipe tables with every column. JSON is each
command's own document (what `--json` always printed). See docs/cli.md.
"""

from __future__ import annotations

import copy
import io
import json
import sys
import weakref
from typing import Any, Iterator

from rich import box
from rich.console import Console, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ahe.errors import AheError

FORMATS = ("table", "markdown", "json")


def resolve_format(fmt: str | bool | None, json_flag: bool = False) -> str:
    """The output format of `--format` and the older `--json` (its alias); a clear error otherwise.

    A bool is the old `json_out` argument of the command functions (True = json).
    """
    if isinstance(fmt, bool):
        fmt, json_flag = None, json_flag or fmt
    if fmt is not None and fmt not in FORMATS:
        raise AheError(f"--format must be table, markdown or json, not {fmt!r}")
    if json_flag and fmt not in (None, "json"):
        raise AheError(f"--json asks for JSON but --format asks for {fmt}: give one of them")
    return "json" if json_flag else fmt or "table"


def plain(cell: Any) -> str:
    """A cell's text without rich markup (a `str` cell is markup, as `Table.add_row` reads it)."""
    if cell is None:
        return ""
    if isinstance(cell, Text):
        return cell.plain
    if isinstance(cell, str):
        return Text.from_markup(cell).plain
    return str(cell)


def table_rows(table: Table) -> tuple[list[str], list[list[str]]]:
    """(headers, rows) of a rich table as plain text."""
    headers = [plain(c.header) for c in table.columns]
    cells = [[plain(v) for v in c.cells] for c in table.columns]
    return headers, [list(r) for r in zip(*cells)] if cells else []


def markdown_table(table: Table) -> str:
    """A GitHub-flavoured pipe table (title as a bold line above it, caption below)."""
    headers, rows = table_rows(table)

    def cell(text: str) -> str:
        return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>").strip() or " "

    align = {"right": "---:", "center": ":---:"}
    lines = []
    if table.title:
        lines += [f"**{cell(plain(table.title))}**", ""]
    lines.append("| " + " | ".join(cell(h) for h in headers) + " |")
    lines.append("|" + "|".join(align.get(c.justify, "---") for c in table.columns) + "|")
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    if table.caption:
        lines += ["", cell(plain(table.caption))]
    return "\n".join(lines)


LONG_WORD = 20  # a cell's word longer than this may be folded to make a table fit


def _measure(console: Console, renderable: Any) -> Measurement:
    # unbounded: Measurement.get clamps what it returns to the width it is given
    return Measurement.get(console, console.options.update_width(100_000), renderable)


def _fit_widths(console: Console, table: Table, width: int, fold_long: bool) -> bool:
    """Give each column at least its longest word (header included), the rest of `width` shared
    by how much more each would take; False when even the longest words do not fit.

    With `fold_long`, a cell's word longer than LONG_WORD (a path, an e-mail) may fold; a
    header word never does. Rich itself shrinks the widest columns first, whatever their
    words, which cuts headers to "…"."""
    whole = _measure(console, table)
    if whole.maximum <= width:
        return True
    ranges = [_measure(console, _column_grid(column)) for column in table.columns]
    overhead = whole.minimum - sum(r.minimum for r in ranges)
    mins = [r.minimum for r in ranges]
    if fold_long:
        mins = [max(_measure(console, column.header).minimum, min(r.minimum, LONG_WORD))
                for column, r in zip(table.columns, ranges)]
    spare = width - overhead - sum(mins)
    if spare < 0:
        return False
    for i, r in enumerate(ranges):  # first the folded words whole again, as far as the width goes
        more = min(spare, r.minimum - mins[i])
        if more > 0:
            mins[i], spare = mins[i] + more, spare - more
    wants = [max(0, r.maximum - low) for r, low in zip(ranges, mins)]
    total = sum(wants) or 1
    for column, low, want in zip(table.columns, mins, wants):
        column.width = low + min(want, spare * want // total)
    return True


def _column_grid(column: Any) -> Table:
    """The column's header and cells stacked, to measure them as rich would."""
    grid = Table.grid()
    grid.add_column()
    for cell in (column.header, *column.cells):
        grid.add_row(cell)
    return grid


def _tight(table: Table) -> Table:
    t = copy.copy(table)
    t.box, t.show_edge, t.pad_edge, t.collapse_padding = box.SIMPLE_HEAD, False, False, True
    t.padding = (0, 1)
    return t


def _records(table: Table) -> Table:
    """One block per row: its first cell as a heading, then `header  value` lines."""
    headers, rows = table_rows(table)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", overflow="fold")
    grid.add_column(overflow="fold")
    for i, row in enumerate(rows):
        if i:
            grid.add_row("", "")
        grid.add_row(Text(f"{headers[0]}: " if headers[0] else "", style="dim") + Text(row[0], style="bold"), "")
        for h, v in zip(headers[1:], row[1:]):
            grid.add_row(h, v)
    return grid


NOTHING = {"", "0", "0.0", "0.00", "-", "—", "n/a", "none"}
_OPTIONAL: "weakref.WeakKeyDictionary[Table, list[str]]" = weakref.WeakKeyDictionary()


def optional(table: Table, *headers: str) -> Table:
    """Mark columns the terminal form may leave out, first named first, when the table is too
    wide for the screen (Markdown and JSON keep them)."""
    _OPTIONAL[table] = list(headers)
    return table


def _subset(table: Table, keep: list[Any]) -> Table:
    t = copy.copy(table)
    t.columns = keep
    return t


def _without_uniform(table: Table) -> tuple[Table, list[str]]:
    """The table less the columns with one value in every row (or nothing: 0, -, n/a), and what they said."""
    keep, dropped = [], []
    for i, column in enumerate(table.columns):
        values = {plain(v).strip() for v in column.cells}
        if i and len(values) == 1 and (table.row_count > 1 or values <= NOTHING):
            dropped.append(f"{plain(column.header)} {next(iter(values)) or 'empty'}")
        else:
            keep.append(column)
    return (_subset(table, keep), dropped) if dropped else (table, [])


def _candidates(table: Table) -> Iterator[tuple[Table, list[Text]]]:
    """The ways to draw the table, most complete first, with the notes each needs below it."""
    yield table, []
    tight = _tight(table)
    yield tight, []
    slim, same = _without_uniform(tight)
    notes = [Text("in every row: " + ", ".join(same), style="dim")] if same else []
    if same and len(slim.columns) >= min(3, len(table.columns)):  # not a table of one column and notes
        yield slim, notes
    else:
        slim, notes = tight, []
    left_out: list[str] = []
    for header in _OPTIONAL.get(table, []):
        keep = [c for c in slim.columns if plain(c.header) != header]
        if len(keep) < len(slim.columns):
            slim, left_out = _subset(slim, keep), left_out + [header]
            yield slim, notes + [Text(f"left out at this width: {', '.join(left_out)} (--format markdown has every column)",
                                      style="dim")]


def _title_above(console: Console, table: Table, notes: list[Text]) -> RenderableType:
    """The table, its title on a line of its own when the table is narrower (rich would wrap it to the table's width)."""
    if not table.title or _measure(console, table).maximum >= _measure(console, table.title).maximum:
        return Group(table, *notes) if notes else table
    title = Text(plain(table.title), style="bold")
    table = copy.copy(table)
    table.title = None
    return Group(title, table, *notes)


def fit(console: Console, table: Table, width: int | None = None) -> RenderableType:
    """The table as it fits `width` with no header word cut: as drawn; tighter; less the columns
    with one value in every row, then less its optional columns (both named below it); the same
    again letting very long cell words fold; else one block per row."""
    width = width or console.width
    for column in table.columns:
        column.overflow = "fold"  # never an ellipsis, in a header or a cell
    for fold_long in (False, True):
        for candidate, notes in _candidates(table):
            if _fit_widths(console, candidate, width, fold_long):
                return _title_above(console, candidate, notes)
    out: list[RenderableType] = []
    if table.title:
        out.append(Text(plain(table.title), style="bold"))
    out.append(_records(table))
    if table.caption:
        out.append(Text(plain(table.caption), style="dim"))
    return Group(*out)


class TableOutput:
    """Where a command prints its tables and the lines around them, in one of FORMATS.

    `print` takes what `Console.print` takes; in `json` form it prints nothing (the command
    prints its document with `json`), in `markdown` form text loses its markup and tables
    become pipe tables.
    """

    def __init__(self, fmt: str | bool = "table", console: Console | None = None) -> None:
        self.fmt = resolve_format(fmt)
        self.console = console or Console()

    def print(self, *items: Any, **kwargs: Any) -> None:
        if self.fmt == "json":
            return
        if any(isinstance(i, Group) for i in items):  # a group's tables are tables too
            for item in items:
                for part in item.renderables if isinstance(item, Group) else [item]:
                    self.print(part, **kwargs)
            return
        if self.fmt == "table":
            self.console.print(*(fit(self.console, i) if isinstance(i, Table) else i for i in items), **kwargs)
            return
        for item in items or ("",):
            # a pipe table is a block of its own; text keeps its lines (indentation would make code blocks)
            self._write("\n" + markdown_table(item) + "\n" if isinstance(item, Table) else
                        "\n".join(line.strip() for line in self._text(item).splitlines()))

    def json(self, data: Any) -> None:
        """The command's JSON document (only in `json` form)."""
        if self.fmt == "json":
            self._write(json.dumps(data, indent=2, default=str))

    def _text(self, item: Any) -> str:
        if isinstance(item, (str, Text)):
            return plain(item)
        wide = Console(width=10_000, no_color=True, record=True, file=io.StringIO())
        wide.print(item)
        return "\n".join(line.rstrip() for line in wide.export_text().splitlines())

    def _write(self, text: str) -> None:
        file = self.console.file if self.console.file is not None else sys.stdout
        file.write(text + "\n")
        file.flush()
