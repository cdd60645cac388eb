"""A self-contained static HTML dashboard: inline CSS, plots as base64 data URIs, no scripts
and no external resources, so it opens offline."""

from __future__ import annotations

import base64
import html

from reports.tables import Table

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.5em; }
table { border-collapse: collapse; font-size: 0.85em; margin-bottom: 1em; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #eef; position: sticky; top: 0; }
tr.warn td { background: #fff4e0; }
.plots img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; display: block; }
ul.intro { color: #444; }
"""


def _table(table: Table) -> str:
    out = [f"<h2>{html.escape(table.title)}</h2>"]
    if not table.rows:
        out.append("<p>(none)</p>")
        return "\n".join(out)
    out.append("<table>")
    out.append("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in table.headers) + "</tr></thead>")
    out.append("<tbody>")
    classes = table.row_classes or [""] * len(table.rows)
    for row, css in zip(table.rows, classes):
        attr = f' class="{css}"' if css else ""
        out.append(f"<tr{attr}>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def render_html(title: str, intro: list[str], tables: list[Table], plots: dict[str, bytes]) -> str:
    """The whole page as one string."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        '<ul class="intro">' + "".join(f"<li>{html.escape(line)}</li>" for line in intro) + "</ul>",
    ]
    if tables:
        parts.append(_table(tables[0]))
    if plots:
        parts.append('<h2>Plots</h2><div class="plots">')
        for name, png in plots.items():
            data = base64.b64encode(png).decode("ascii")
            parts.append(f'<img id="plot-{html.escape(name)}" alt="{html.escape(name)}" src="data:image/png;base64,{data}">')
        parts.append("</div>")
    else:
        parts.append("<p>No plots (matplotlib is not installed).</p>")
    parts.extend(_table(t) for t in tables[1:])
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
