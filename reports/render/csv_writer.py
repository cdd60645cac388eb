"""The one way the reports write CSV (report.csv and the HUD's files): text cells that a
spreadsheet or a CSV reader could take for something else made safe.

- A text cell that would start a formula (`=`, `+`, `-`, `@`, a tab or a carriage return:
  a model name "=HYPERLINK(...)" in a hand-made line) gets a leading apostrophe.
- A carriage return in a text cell becomes a newline, which the writer quotes: written as
  it is, with rows ended by "\\n", it is left unquoted, and readers end the row there (the
  columns shift, and the text after it starts a cell the formula guard never saw).

Cells of numbers are written as given.
"""

from __future__ import annotations

import csv
import io
from typing import Iterable, Sequence

#: What a spreadsheet reads as the start of a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def text_cell(value: object) -> object:
    """A text cell a spreadsheet shows as the text it is (see the module's docstring)."""
    if not isinstance(value, str):
        return value
    if value.startswith(FORMULA_STARTS):
        value = "'" + value
    return value.replace("\r\n", "\n").replace("\r", "\n")


def write_csv(header: Sequence[str], rows: Iterable[Sequence[object]],
              numbers: Iterable[str] = ()) -> str:
    """CSV text: the header, then each row, every cell but those of the columns in
    `numbers` guarded as text (`text_cell`)."""
    numeric = {index for index, name in enumerate(header) if name in set(numbers)}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([cell if index in numeric else text_cell(cell) for index, cell in enumerate(row)])
    return out.getvalue()
