"""A field added to the table with report=COLUMN reaches every report (core.columns)."""

import json
import math
import subprocess
import sys
import textwrap

import pytest

from tests.reports.conftest import craft_line


#: Run in a child: the field table with one more field, `colour`, reported as a column, then
#: the reports over the results file; prints what the CSV, the dashboard and the history show.
_CHILD = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    import core.fields as table
    source = Path(table.__file__).read_text(encoding="utf-8")
    anchor = "\\n)\\n\\n_BY_SCOPE"
    assert source.count(anchor) == 1
    colour = ('    _f("colour", EXPERIMENT, str, default=None, optional=True, report=COLUMN, '
              'help="a colour"),')
    exec(compile(source.replace(anchor, "\\n" + colour + anchor), table.__file__, "exec"), table.__dict__)

    from reports.analyse.aggregate import build_report
    from reports.analyse.dashboard import build_payload
    from reports.analyse.history import compute_history
    from reports.read.columnar import Engine
    from reports.read.load import load
    from reports.render.render_csv import render_csv

    with Engine(None) as engine:
        loaded = load([Path(sys.argv[1])], engine=engine)
        history = compute_history(engine, loaded.files, loaded.runs, "eager")
        report = build_report(loaded.records, "eager")
        payload = build_payload("t", [], report, history)
    csv = render_csv(report).splitlines()
    print(json.dumps({
        "csv_header": csv[0].split(","),
        "csv_rows": csv[1:],
        "filters": payload["filters"],
        "configs": payload["configs"],
        "rows": {payload["configs"][r["c"]]["label"]: r["sp"] for r in payload["rows"]},
        "history": {p.config.label: [p.speedups, p.log_speedup] for p in history.points},
    }))
''')


@pytest.mark.e2e
def test_a_new_column_field_is_a_csv_column_a_dashboard_filter_and_a_history_group(write_results):
    """One field added to the table with report=COLUMN, and nothing else changed: the CSV has
    its column, the dashboard a filter on it, the history a group per value, each
    compared against the eager baseline of the same value (the baseline shares it)."""
    lines = []
    for colour, eager, inductor in ((None, 1.0, 0.5), ("blue", 2.0, 0.5)):
        for stack, t in (("eager", eager), ("inductor", inductor)):
            line = craft_line("mlp", stack, times=[t, t, t], code="PASS", run_id="r", timestamp=1.0)
            if colour is not None:
                line["experiment"]["colour"] = colour
            lines.append(line)
    path = write_results(lines)
    child = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == 0, child.stderr
    shown = json.loads(child.stdout)
    assert "colour" in shown["csv_header"]
    at = shown["csv_header"].index("colour")
    assert sorted(row.split(",")[at] for row in shown["csv_rows"]) == ["", "", "blue", "blue"]
    assert "colour" in shown["filters"]
    assert sorted(c["colour"] for c in shown["configs"]) == ["", "", "blue", "blue"]
    assert shown["rows"] == {"cpu eager eval fp32": 1.0, "cpu eager eval fp32 colour=blue": 1.0,
                             "cpu inductor eval fp32": 2.0, "cpu inductor eval fp32 colour=blue": 4.0}
    history = shown["history"]
    assert set(history) == set(shown["rows"])
    assert history["cpu inductor eval fp32 colour=blue"][0] == 1
    assert history["cpu inductor eval fp32 colour=blue"][1] == pytest.approx(math.log(4.0))
    assert history["cpu inductor eval fp32"][1] == pytest.approx(math.log(2.0))
