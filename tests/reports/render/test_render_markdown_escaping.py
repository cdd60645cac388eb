"""Names from results files cannot inject HTML or break tables in the Markdown report."""

from reports.render.render_markdown import render_markdown
from reports.render.tables import Table


def test_raw_html_and_pipes_from_model_names_are_escaped():
    name = '<img src=x onerror=alert(1)>|a&b'
    page = render_markdown(f"Report of {name}", [f"models: {name}"],
                           [Table(f"Rows for {name}", ["model", "status"], [[name, "ok"]])])
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&amp;b" in page
    row = next(line for line in page.splitlines() if line.startswith("| &lt;img"))
    assert row.count("|") - row.count("\\|") == 3  # two cells, nothing split
