"""The dashboard: one self-contained HTML file (inline CSS, data and script; no network).

The data (reports/analyse/dashboard.py) is embedded as JSON in a `<script type="application/json">`
element, with `<`, `>` and `&` written as JSON escapes so that no text from the results can
close the element; the script (reports/render/dashboard.js) draws every table and SVG chart from
it and only ever sets text through `textContent`. Without JavaScript the page still shows
the notes and the configuration summary, rendered here with every value HTML-escaped.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from reports.render.tables import Table

_ASSETS = Path(__file__).resolve().parent

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 0 1.5em 2em; color: #222; }
h1 { font-size: 1.5em; margin: 0.6em 0 0.2em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
h3 { font-size: 1em; }
table { border-collapse: collapse; font-size: 0.85em; margin-bottom: 1em; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #eef; position: sticky; top: 2.6em; }
th.sortable { cursor: pointer; }
td.num { text-align: right; white-space: nowrap; }
td.model { white-space: nowrap; }
td.good { color: #1a7f37; } td.bad, .bad { color: #b42318; font-weight: 600; }
.muted, td.muted { color: #777; }
tr.row-warn td { background: #fff8e6; }
tr.row-bad td { background: #fdecea; } tr.row-good td { background: #e8f5e9; } tr.row-mixed td { background: #fff8e6; }
.tag { background: #eee; border-radius: 3px; padding: 0 4px; margin-left: 6px; font-size: 0.85em; color: #555; }
#filters { position: sticky; top: 0; z-index: 2; background: #fafafa; border-bottom: 1px solid #ddd;
  padding: 6px 0; display: flex; flex-wrap: wrap; gap: 12px; align-items: center; font-size: 0.9em; }
.legend { font-size: 0.85em; margin: 4px 0 12px; display: flex; flex-wrap: wrap; gap: 10px; align-items: center; }
.swatch { display: inline-block; padding: 1px 6px; border: 1px solid #ccc; }
.key { display: inline-flex; align-items: center; gap: 4px; }
.dot { display: inline-block; width: 10px; height: 10px; border-radius: 5px; }
svg.chart { width: 100%; max-width: 900px; height: auto; background: #fff; border: 1px solid #e3e3e3; display: block; }
svg .grid { stroke: #eee; } svg .ref { stroke: #333; stroke-width: 1; stroke-dasharray: 4 3; }
svg .tick { font-size: 11px; fill: #555; } svg .chart-title { font-size: 13px; font-weight: 600; fill: #222; }
svg .muted-text { font-size: 13px; fill: #888; }
svg .mark.regressed { fill: #d62728; } svg .mark.improved { fill: #2ca02c; }
.history-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 10px; max-width: 1500px; }
.history-grid svg.chart { max-width: none; }
code { font-size: 0.85em; word-break: break-all; }
#provenance-latest { font-size: 0.95em; }
"""

_SECTIONS = [
    ("bisect", "Bisection: the figure over the range, with each point's verdict"),
    ("summary", "Per configuration: the HUD's four metrics"),
    ("history", "History across runs"),
    ("changes", "Models that changed the most (latest run against the previous one)"),
    ("pivot", "Speedup per model and configuration"),
    ("speedup-chart", "Speedup distribution"),
    ("peak-chart", "Percent of peak (achieved TFLOP/s over the device's peak for the precision used)"),
    ("experiments", "Experiments"),
    ("provenance", "Provenance: runs, commands, versions, devices"),
    ("notes", "Notes"),
]


def embed_json(data: Any) -> str:
    """JSON that is safe inside a <script> element (no '<', '>' or '&' characters)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _static_table(table: Table) -> str:
    out = [f"<h3>{html.escape(table.title)}</h3>", "<table>"]
    out.append("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in table.headers) + "</tr></thead><tbody>")
    for row in table.rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def render_html(payload: dict[str, Any], fallback: list[Table]) -> str:
    """The whole page as one string: `payload` drawn by the embedded script; `fallback`
    tables shown when scripts do not run."""
    title = html.escape(str(payload.get("title", "Experiment report")))
    script = (_ASSETS / "dashboard.js").read_text(encoding="utf-8")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{title}</h1>",
        '<div id="generated" class="muted"></div>',
        '<div id="provenance-summary"></div>',
        '<div id="filters"></div>',
        "<noscript><p>Scripts are off: only the summary is shown.</p>"
        + "".join(_static_table(t) for t in fallback) + "</noscript>",
    ]
    for section, heading in _SECTIONS:
        if section == "bisect" and not payload.get("bisections"):
            continue  # only beside a bisect log
        parts.append(f'<section><h2>{html.escape(heading)}</h2><div id="{section}"></div></section>')
    parts.append(f'<script type="application/json" id="dashboard-data">{embed_json(payload)}</script>')
    parts.append(f"<script>{script}</script>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
