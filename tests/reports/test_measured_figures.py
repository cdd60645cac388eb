"""A measured figure added to the table (core.measures) reaches every output of the reports."""

import json
import subprocess
import sys
import textwrap

import pytest

from core.measures import measures
from tests.reports.conftest import craft_line

#: Run in a child: the figure table with one more entry, `launch_gap` (a figure no version
#: records: the host's gap between launches per iteration), then `report` and `compare` as a user runs them; prints what the
#: console, the CSV, the Markdown, the dashboard's data and compare show.
_CHILD = textwrap.dedent('''
    import contextlib, io, json, re, sys
    from pathlib import Path
    import core.measures as table
    source = Path(table.__file__).read_text(encoding="utf-8")
    anchor = "\\n)\\n\\n\\ndef measures("
    assert source.count(anchor) == 1
    entry = ('    Measure("launch_gap", ("summary.launch_gap.per_iteration",), unit="s", '
             'header="launch gap/iter", prints=TIME, lower_is_better=True),')
    exec(compile(source.replace(anchor, "\\n" + entry + anchor), table.__file__, "exec"), table.__dict__)

    from reports.cli import compare_main, report_main

    base, new, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    shown = {}
    for name, run in (("report", lambda: report_main([base, new, "--output-dir", str(out), "--no-cache"])),
                      ("cached", lambda: report_main([base, new, "--csv", str(out / "cached.csv"), "--quiet",
                                                      "--cache-dir", str(out / "cache")])),
                      ("compare", lambda: compare_main([base, new, "--no-cache"]))):
        console = io.StringIO()
        with contextlib.redirect_stdout(console):
            shown[name + "_code"] = run()
        shown[name] = console.getvalue()
    html = (out / "report.html").read_text(encoding="utf-8")
    data = re.search(r'<script type="application/json" id="dashboard-data">(.*?)</script>', html, re.S)
    shown["dashboard"] = json.loads(data.group(1))
    shown["csv"] = (out / "report.csv").read_text(encoding="utf-8")
    shown["cached_csv"] = (out / "cached.csv").read_text(encoding="utf-8")
    shown["markdown"] = (out / "report.md").read_text(encoding="utf-8")
    print("SHOWN " + json.dumps(shown))
''')


def _line(model, run, timestamp, busy):
    line = craft_line(model, "inductor", times=[0.04, 0.04, 0.04], code="PASS", run_id=run, timestamp=timestamp)
    if busy is not None:
        line["summary"]["launch_gap"] = {"per_iteration": busy}
    return line


@pytest.fixture(scope="module")
def shown(tmp_path_factory):
    folder = tmp_path_factory.mktemp("figure")
    files = []
    for name, run, stamp, mlp_busy in (("base", "r1", 1.0, 0.010), ("new", "r2", 2.0, 0.020)):
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in (
            _line("mlp", run, stamp, mlp_busy), _line("cnn", run, stamp, None))), encoding="utf-8")
        files.append(str(path))
    child = subprocess.run([sys.executable, "-c", _CHILD, *files, str(folder)], capture_output=True,
                           text=True, timeout=300)
    assert child.returncode == 0, child.stderr
    (last,) = [line for line in child.stdout.splitlines() if line.startswith("SHOWN ")]
    return json.loads(last[len("SHOWN "):])


pytestmark = pytest.mark.e2e


def test_the_figure_is_not_in_the_table_here():
    assert "launch_gap" not in {m.name for m in measures()}


def test_the_new_figure_is_a_csv_column_read_alike_with_and_without_the_cache(shown):
    assert shown["report_code"] == 0 and shown["cached_code"] == 0
    rows = [line.split(",") for line in shown["csv"].splitlines()]
    at = rows[0].index("launch_gap")
    assert {row[rows[0].index("model")]: row[at] for row in rows[1:]} == {"mlp": "0.02", "cnn": ""}
    assert shown["cached_csv"] == shown["csv"]


def test_the_new_figure_is_a_column_of_the_console_and_markdown_tables(shown):
    header = next(line for line in shown["report"].splitlines() if "launch gap/iter" in line)
    assert "median/iter" in header
    mlp = next(line for line in shown["report"].splitlines() if "builtin/mlp" in line and "ms" in line)
    assert mlp.split()[-1:] == ["ms"] and mlp.split()[-2] == "20"
    assert "launch gap/iter" in shown["markdown"] and "20 ms" in shown["markdown"]


def test_the_new_figure_is_in_the_dashboard_data_with_what_the_page_needs_to_show_it(shown):
    data = shown["dashboard"]
    (entry,) = [f for f in data["figures"] if f["name"] == "launch_gap"]
    assert entry["key"] == "launch_gap" and entry["header"] == "launch gap/iter" and entry["prints"] == "time"
    assert {row["m"]: row["launch_gap"] for row in data["rows"]} == {"builtin/mlp": 0.02, "builtin/cnn": None}


def test_compare_says_the_new_figure_got_worse(shown):
    assert shown["compare_code"] == 0  # the time did not change: no regression
    moved = [line for line in shown["compare"].splitlines() if "launch_gap" in line]
    assert len(moved) == 1
    assert "builtin/mlp" in moved[0] and "10 ms" in moved[0] and "20 ms" in moved[0]
    assert "+100.0%" in moved[0] and "worse" in moved[0]
