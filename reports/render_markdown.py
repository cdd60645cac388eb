"""Markdown rendering of the report tables."""

from __future__ import annotations

from reports.tables import Table


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ") or " "


def render_table(table: Table) -> str:
    lines = [f"## {table.title}", ""]
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
    parts = [f"# {title}", ""]
    parts.extend(f"- {line}" for line in intro)
    parts.append("")
    parts.extend(render_table(t) + "\n" for t in tables)
    return "\n".join(parts)
