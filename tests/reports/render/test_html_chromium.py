"""The dashboard in a real browser: headless Chromium driven by Selenium.

Needs Debian's chromium and chromium-driver (scripts/install_chromium.sh, run by .ci/run)
and selenium (the test extra); skipped with the reason otherwise.
"""

from __future__ import annotations

import os

import pytest

from reports.cli import report_main
from tests.reports import browser
from tests.reports.conftest import craft_line, write_bisect_log

if os.environ.get("EXPERIMENT_RUNNER_REQUIRE_BROWSER") and browser.missing_reason():
    raise RuntimeError(f"browser tests required (EXPERIMENT_RUNNER_REQUIRE_BROWSER) but {browser.missing_reason()}")
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(browser.missing_reason() is not None, reason=browser.missing_reason() or "")]

HOSTILE = '<img src=x onerror="document.title=\'pwned\'">'
MODELS = {"mlp": 0.010, "cnn": 0.030, "transformer_block": 0.050, HOSTILE: 0.020}


def _history_lines():
    """Three nightly runs: eager, inductor and aot_eager on CPU; inductor's cnn slows down
    by half in the last run, aot_eager's mlp fails in it; every line verified."""
    lines = []
    for night in range(3):
        stamp = 86400.0 * night + 7200
        run = f"night-{night}"
        for model, t in MODELS.items():
            lines.append(craft_line(model, "eager", times=[t, t * 1.01, t * 0.99], cold_start=t,
                                    peak_host=2**28, code="PASS", run_id=run, timestamp=stamp))
            slow = 1.5 if (night == 2 and model == "cnn") else 1.0
            lines.append(craft_line(model, "inductor", times=[t / 2 * slow, t / 2.02 * slow, t / 1.98 * slow],
                                    cold_start=5.0, peak_host=2**29, code="PASS", run_id=run, timestamp=stamp))
            if night == 2 and model == "mlp":
                lines.append(craft_line(model, "aot_eager", status="failed", code="VERIFIER_DIDNT_RUN",
                                        error="RuntimeError: boom", run_id=run, timestamp=stamp))
            else:
                lines.append(craft_line(model, "aot_eager", times=[t * 0.9, t * 0.91, t * 0.89], cold_start=0.5,
                                        peak_host=2**28, code="PASS", run_id=run, timestamp=stamp))
    lines.append(craft_line("mlp", "inductor", times=[0.004, 0.004, 0.004], test="train", run_id="night-2",
                            timestamp=86400.0 * 2 + 7200))
    lines[-1]["workload"] = {"flops_per_iteration": 4e9}  # a FLOP count on a CPU: no peak
    return lines


@pytest.fixture(scope="module")
def driver():
    driver = browser.start()
    yield driver
    driver.quit()


@pytest.fixture
def page(write_results, tmp_path, driver):
    path = write_results(_history_lines())
    write_bisect_log(path)  # a bisection's log beside the results: its section
    html = tmp_path / "dash" / "report.html"
    assert report_main([str(path), "--html", str(html), "--quiet"]) == 0
    driver.get_log("browser")  # drop anything from earlier pages
    driver.get(html.as_uri())
    assert driver.find_element("tag name", "body").get_attribute("data-rendered") == "true"
    return driver


def _texts(driver, selector):
    return [e.text for e in driver.find_elements("css selector", selector)]


def _visible_models(driver):
    return _texts(driver, "#pivot-table tbody td.model")


def test_tables_and_charts_render_without_console_errors(page):
    assert browser.console_errors(page) == []
    assert page.title == "Experiment report"  # the hostile model name ran no script
    summary = _texts(page, "#summary-table tbody tr td:first-child")
    assert summary == ["cpu eager eval fp32baseline", "cpu aot_eager eval fp32", "cpu inductor eval fp32",
                       "cpu inductor train fp32"]
    # Pass rate over verified lines; the train line was never verified.
    rows = {r.find_element("css selector", "td").text: [c.text for c in r.find_elements("css selector", "td")]
            for r in page.find_elements("css selector", "#summary-table tbody tr")}
    assert rows["cpu aot_eager eval fp32"][1] == "75% (3/4)"
    assert rows["cpu inductor train fp32"][1] == "not verified"
    assert rows["cpu inductor eval fp32"][5].startswith("n/a: CPU peak")  # no ratio from host RSS
    # The pivot: every model, inductor's cells coloured, aot_eager's failure shown as such.
    assert sorted(_visible_models(page)) == sorted(f"builtin/{m}" for m in MODELS)
    cells = page.find_elements("css selector", "#pivot-table tbody td.num")
    assert any("rgb(" in (c.get_attribute("style") or "") for c in cells)
    assert "fail" in [c.text for c in cells]
    # Charts: the speedup distribution and the four history charts, drawn as SVG.
    for chart in ("speedup", "peak", "pass-rate", "geomean-speedup", "compile-time", "memory-compression"):
        assert page.find_elements("css selector", f'svg[data-chart="{chart}"]'), chart
    assert "1 experiment(s) with a FLOP count ran on a device without a peak" in page.find_element(
        "css selector", "#peak-chart").text
    assert page.find_elements("css selector", 'svg[data-chart="geomean-speedup"] polyline.series')
    assert "no device memory" in page.find_element("css selector", 'svg[data-chart="memory-compression"]').text
    # The last night is flagged: cnn regressed under inductor, mlp newly failing under aot_eager.
    assert page.find_elements("css selector", 'svg[data-chart="geomean-speedup"] [data-mark="regressed"]')
    flagged = _texts(page, "#transitions-table tbody tr")
    assert any("cpu inductor eval fp32" in row and "regressed" in row for row in flagged)
    assert any("cpu aot_eager eval fp32" in row and "1 newly failing" in row for row in flagged)
    changes = _texts(page, "#changes-table tbody tr")
    assert any(row.startswith("builtin/cnn cpu inductor eval fp32") and "regressed" in row for row in changes)
    assert any(row.startswith("builtin/mlp cpu aot_eager eval fp32") and "newly failing" in row for row in changes)
    # Provenance: the runs with their dates.
    assert _texts(page, "#runs-table tbody td:first-child") == ["night-2", "night-1", "night-0"]
    assert "3 runs" in page.find_element("id", "provenance-latest").text


def test_the_hostile_model_name_is_shown_as_text(page):
    assert page.find_elements("css selector", "img") == []
    assert f"builtin/{HOSTILE}" in _visible_models(page)


def test_filters_change_what_is_visible(page):
    from selenium.webdriver.support.ui import Select

    Select(page.find_element("id", "filter-stack")).select_by_value("inductor")
    assert _texts(page, "#summary-table tbody tr td:first-child") == ["cpu inductor eval fp32", "cpu inductor train fp32"]
    headers = _texts(page, "#pivot-table thead th")
    assert headers[1:] == ["cpu inductor eval fp32", "cpu inductor train fp32"]
    Select(page.find_element("id", "filter-test")).select_by_value("train")
    assert _visible_models(page) == ["builtin/mlp"]
    assert page.find_element("id", "filter-status").text.startswith("1 of ")
    Select(page.find_element("id", "filter-test")).select_by_value("")
    model = page.find_element("id", "filter-model")
    model.send_keys("CNN")
    assert _visible_models(page) == ["builtin/cnn"]
    assert [r.split(" ")[0] for r in _texts(page, "#experiments-table tbody tr")] == ["builtin/cnn"]
    assert all("cnn" in row for row in _texts(page, "#changes-table tbody tr"))
    model.clear()
    model.send_keys("no such model")
    assert _texts(page, "#pivot-table tbody td") == ["(nothing matches the filters)"]
    assert browser.console_errors(page) == []


def test_sorting_the_pivot_by_a_configuration(page):
    header = next(h for h in page.find_elements("css selector", "#pivot-table thead th")
                  if h.text.startswith("cpu inductor eval fp32"))
    header.click()  # fastest first
    header = next(h for h in page.find_elements("css selector", "#pivot-table thead th")
                  if h.text.startswith("cpu inductor eval fp32"))
    column = [h.text for h in page.find_elements("css selector", "#pivot-table thead th")].index(header.text)
    values = [r.find_elements("css selector", "td")[column].text
              for r in page.find_elements("css selector", "#pivot-table tbody tr")]
    speedups = [float(v.rstrip("x*")) for v in values if v.endswith("x") or v.endswith("x*")]
    assert speedups == sorted(speedups, reverse=True) and len(speedups) == len(MODELS)
    assert browser.console_errors(page) == []


def test_the_bisection_is_drawn_over_its_points_with_their_verdicts(page):
    section = page.find_element("id", "bisect")
    assert "Bisection over 7 commits (latency)" in section.text
    assert "first bad c5 (commit 5), last good c3 (commit 3); skipped between them: c4" in section.text
    assert "by more than 10%" in section.text
    chart = page.find_element("css selector", 'svg[data-chart="bisect-0-0"]')
    dots = chart.find_elements("css selector", "circle.point")
    # The five measured points, in the range's order, each coloured by its verdict.
    by_x = sorted((float(d.get_attribute("cx")), d.get_attribute("data-series")) for d in dots)
    assert [verdict for _, verdict in by_x] == ["good", "good", "skipped", "bad", "bad"]
    assert len(chart.find_elements("css selector", "line.interval")) == 5
    # The two points no round measured sit on the axis, between the first two measured.
    unmeasured = chart.find_elements("css selector", 'circle.axis-mark[data-kind="not measured"]')
    assert len(unmeasured) == 2
    assert all(by_x[0][0] < float(m.get_attribute("cx")) < by_x[1][0] for m in unmeasured)
    assert [t.text for t in chart.find_elements("css selector", "text")].count("first bad") == 1
    rows = _texts(page, "#bisect-table-0 tbody tr")
    assert [row.split(" ")[:2] for row in rows] == [["0", "c0"], ["3", "c3"], ["4", "c4"], ["5", "c5"], ["6", "c6"]]
    assert "11.6 ms (11.4 ms .. 11.8 ms)" in rows[2] and "skipped" in rows[2]
    assert browser.console_errors(page) == []
