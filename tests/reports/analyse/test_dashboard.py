"""The dashboard's data (reports/analyse/dashboard.py): its view of a bisection."""

from __future__ import annotations

from reports.analyse.aggregate import build_report
from reports.analyse.bisection import bisect_steps
from reports.analyse.dashboard import bisection_entry, build_payload
from reports.render.render_html import render_html
from core.files.bisect_log import log_path
from tests.reports.conftest import BISECT_EXPERIMENT, write_bisect_log


def test_a_bisection_is_every_point_in_order_with_its_latest_verdict(tmp_path):
    steps = bisect_steps(write_bisect_log(tmp_path / "results.jsonl"))
    entry = bisection_entry(steps)
    assert [p["label"] for p in entry["points"]] == [f"c{i}" for i in range(7)]
    assert [p["verdict"] for p in entry["points"]] == [
        "good", "not measured", "not measured", "good", "skipped", "bad", "bad"]
    assert entry["firstBad"] == "c5" and entry["lastGood"] == "c3"
    assert entry["skippedBetween"] == ["c4"]
    assert (entry["metric"], entry["unit"], entry["threshold"]) == ("latency", "s", 0.1)
    assert entry["experiments"] == [BISECT_EXPERIMENT]
    # Each measured point's figure (the latest: c4's second measurement) with its interval.
    c4 = entry["points"][4]
    assert c4["figures"][0]["value"] == 0.0116 and c4["title"] == "commit 4"
    assert c4["figures"][0]["low"] < 0.0116 < c4["figures"][0]["high"]
    assert entry["points"][1]["figures"] == [None]


def test_the_page_has_a_bisection_section_only_beside_a_bisect_log(tmp_path):
    report = build_report([])
    plain = build_payload("t", [], report)
    assert plain["bisections"] == []
    assert 'id="bisect"' not in render_html(plain, [])
    steps = bisect_steps(write_bisect_log(tmp_path / "results.jsonl"))
    payload = build_payload("t", [], report, bisections=[steps])
    assert [len(b["points"]) for b in payload["bisections"]] == [7]
    assert 'id="bisect"' in render_html(payload, [])
    assert bisect_steps(log_path(tmp_path / "other.jsonl")) is None
