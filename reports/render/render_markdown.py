"""Markdown rendering of the report tables.

Every piece of text from the results (model names, errors, commands) is escaped: HTML
(`<`, `>`, `&` as entities, so a renderer that allows inline HTML shows them as text),
the table separator `|`, backslashes, and the characters that would start emphasis, code
or links.
"""

from __future__ import annotations

import re

from reports.render.tables import Table

_MARKDOWN_SPECIAL = re.compile(r"([\\`*\[\]|])")
#: Any character `escape` changes: most cells (names, figures) hold none.
_CHANGED = re.compile(r"[\\`*\[\]|&<>\r\n]")


def escape(text: str) -> str:
    """Text safe anywhere in a Markdown line: no HTML, no table cell break, no markup."""
    if not _CHANGED.search(text):
        return text
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    return text.replace("\r", " ").replace("\n", " ")


def _cell(text: str) -> str:
    return escape(text) or " "


def render_table(table: Table) -> str:
    lines = [f"## {escape(table.title)}", ""]
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
    parts = [f"# {escape(title)}", ""]
    parts.extend(f"- {escape(line)}" for line in intro)
    parts.append("")
    parts.extend(render_table(t) + "\n" for t in tables)
    return "\n".join(parts)
