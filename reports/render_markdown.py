"""Markdown rendering of the report tables.

Text from results files (model names, errors) is escaped: raw HTML never reaches the page
(`<`, `>` and `&` become entities) and `|` never splits a table cell.
"""

from __future__ import annotations

import html

from reports.tables import Table


def _text(text: str) -> str:
    """One line of plain text: no raw HTML, no line breaks."""
    return html.escape(text, quote=False).replace("\n", " ")


def _cell(text: str) -> str:
    return _text(text.replace("\\", "\\\\").replace("|", "\\|")) or " "


def render_table(table: Table) -> str:
    lines = [f"## {_text(table.title)}", ""]
    if not table.rows:
        lines.append("(none)")
        return "\n".join(lines)
    lines.append("| " + " | ".join(_cell(h) for h in table.headers) + " |")
    lines.append("|" + "|".join("---" for _ in table.headers) + "|")
    for row in table.rows:
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines)


def render_markdown(title: str, intro: list[str], tables: list[Table]) -> str:
    """A Markdown document: a heading, intro lines, one section per table."""
    parts = [f"# {_text(title)}", ""]
    parts.extend(f"- {_text(line)}" for line in intro)
    parts.append("")
    parts.extend(render_table(t) + "\n" for t in tables)
    return "\n".join(parts)
