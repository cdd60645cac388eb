"""Plain-text tables for the terminal: every cell made printable (core.text), so that a
model name or a path cannot forge a console line."""

from __future__ import annotations

from core.text import printable
from reports.render.tables import Table

MAX_CELL = 60


def _clip(text: str) -> str:
    text = printable(text)
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 3] + "..."


def render_table(table: Table) -> str:
    """A title line and an aligned table; '(none)' when it has no rows."""
    title = printable(table.title)
    lines = [title, "=" * len(title)]
    if not table.rows:
        lines.append("(none)")
        return "\n".join(lines)
    cells = [[_clip(c) for c in row] for row in table.rows]
    widths = [len(h) for h in table.headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines.append("  ".join(h.ljust(w) for h, w in zip(table.headers, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for row in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


def render_tables(tables: list[Table]) -> str:
    return "\n\n".join(render_table(t) for t in tables) + "\n"
