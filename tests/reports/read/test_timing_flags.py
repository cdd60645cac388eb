"""Host-bound lines, slow periods and percent of peak as the reports show them."""

from __future__ import annotations

import csv
import io

from reports.analyse.aggregate import build_report
from reports.analyse.dashboard import build_payload
from reports.read.load import load
from reports.render.render_csv import render_csv
from reports.render.tables import throughput_cell
from tests.reports.conftest import craft_line


def _line(model, accelerator_model=None, **summary):
    line = craft_line(model, "inductor", times=[0.002, 0.002, 0.002], accelerator="cuda",
                      precision="bf16", extra_metrics={name: value for name, value in summary.items()})
    if accelerator_model:
        line["experiment"]["accelerator_model"] = accelerator_model
    return line


def _records(write_results, lines):
    return load([write_results(lines)]).records


def test_host_bound_and_slow_lines_are_shown_as_contention_is(write_results):
    lines = [_line("mlp", host_bound=True, host_bound_fraction=0.8),
             _line("cnn", host_bound=False, host_bound_fraction=0.1,
                   slow_period={"ratio": 1.7, "flagged": True}, unreliable=True,
                   unreliable_reasons=["slow period: the reference ran 1.70x"])]
    records = {r.model: r for r in _records(write_results, lines)}
    assert records["mlp"].host_bound and records["mlp"].host_bound_fraction == 0.8
    assert not records["cnn"].host_bound and records["cnn"].slow_ratio == 1.7
    report = build_report(list(records.values()), None)
    warnings = {row.record.model: row.warnings for row in report.rows}
    assert any(w.startswith("host-bound: 80% of the timed iterations") for w in warnings["mlp"])
    assert any("slow period" in w for w in warnings["cnn"])
    assert not any(w.startswith("host-bound") for w in warnings["cnn"])
    payload = {row["m"]: row for row in build_payload("t", [], report)["rows"]}
    assert payload["builtin/mlp"]["hb"] == 0.8 and payload["builtin/cnn"]["hb"] is None
    assert payload["builtin/cnn"]["slow"] == 1.7


def test_a_line_host_bound_by_the_hosts_share_says_so(write_results):
    """Flagged by the host's share of its iterations (none host-bound by its span): the
    warning names the card's busy share, not a fraction of iterations."""
    lines = [_line("mlp", host_bound=True, host_bound_fraction=0.0, host_share=0.45,
                   host_bound_by="host share")]
    report = build_report(_records(write_results, lines), None)
    warnings = report.rows[0].warnings
    assert "host-bound: the card was busy for under 80% of each iteration; the host's part is " \
        "the rest" in warnings
    assert not any("of the timed iterations" in w for w in warnings)


def test_percent_of_peak_in_the_record_the_table_the_csv_and_the_dashboard(write_results):
    lines = [_line("mlp", "NVIDIA H100 80GB HBM3", throughput={
                 "tflops": 500.0, "fraction_of_peak": 0.505, "peak_tflops": 989.4}),
             _line("cnn", "NVIDIA GeForce RTX 4090", throughput={
                 "tflops": 50.0, "fraction_of_peak": None,
                 "no_peak_reason": "no peak known for cuda device NVIDIA GeForce RTX 4090"}),
             _line("transformer_block")]
    lines[2]["workload"] = {"flops_per_iteration": 2e9}  # a FLOP count without a throughput
    records = {r.model: r for r in _records(write_results, lines)}
    assert (records["mlp"].tflops, records["mlp"].peak_fraction) == (500.0, 0.505)
    assert records["cnn"].peak_fraction is None and "no peak known" in records["cnn"].peak_note
    assert records["transformer_block"].tflops == 2e9 / 0.002 / 1e12
    assert throughput_cell(records["mlp"]) == "500 (50%)"
    assert throughput_cell(records["cnn"]) == "50 (no peak)"
    report = build_report(list(records.values()), None)
    warnings = {row.record.model: row.warnings for row in report.rows}
    assert "no peak known for cuda device NVIDIA GeForce RTX 4090" in warnings["cnn"]
    rows = {row["model"]: row for row in csv.DictReader(io.StringIO(render_csv(report)))}
    assert float(rows["mlp"]["fraction_of_peak"]) == 0.505 and rows["cnn"]["fraction_of_peak"] == ""
    payload = {row["m"]: row for row in build_payload("t", [], report)["rows"]}
    assert payload["builtin/mlp"]["pk"] == 0.505 and payload["builtin/mlp"]["tf"] == 500.0


def test_the_device_busy_time_in_the_record_the_table_the_csv_and_the_dashboard(write_results):
    from reports.render.tables import ROW_HEADERS, row_cells

    lines = [_line("mlp"), craft_line("cnn", "inductor", times=[0.002, 0.002])]
    lines[0]["summary"].update(device_busy_ms=0.731, device_busy={"ms": 0.731, "reason": None})
    lines[1]["summary"].update(device_busy_ms=None, device_busy={
        "ms": None, "reason": "no device kernels to sum on cpu: the device busy time is "
                              "measured on CUDA"})
    records = {r.model: r for r in _records(write_results, lines)}
    assert records["mlp"].device_busy == 0.000731 and records["mlp"].device_busy_reason == ""
    assert records["cnn"].device_busy is None
    assert records["cnn"].device_busy_reason.startswith("no device kernels to sum on cpu")
    report = build_report(list(records.values()), None)
    cells = {row.record.model: dict(zip(ROW_HEADERS, row_cells(row))) for row in report.rows}
    assert cells["mlp"]["device busy/iter"] == "0.731 ms"
    assert cells["cnn"]["device busy/iter"] == "-"
    rows = {row["model"]: row for row in csv.DictReader(io.StringIO(render_csv(report)))}
    assert float(rows["mlp"]["device_busy_s"]) == 0.000731 and rows["cnn"]["device_busy_s"] == ""
    payload = {row["m"]: row for row in build_payload("t", [], report)["rows"]}
    assert payload["builtin/mlp"]["db"] == 0.000731 and payload["builtin/cnn"]["db"] is None


def test_the_figure_at_the_low_pulse_in_the_record_the_csv_and_the_dashboard(write_results):
    lines = [_line("mlp"), _line("cnn")]
    lines[0]["summary"]["pulse_states"] = {"at_low_pulse": {
        "median_per_iter_time": 0.0031, "pulse_ms": 0.6, "processes": [0.0031], "spread": 0.0}}
    lines[1]["summary"]["pulse_states"] = {"at_low_pulse": {
        "median_per_iter_time": None, "reason": "not host-bound: the card sets the time"}}
    records = {r.model: r for r in _records(write_results, lines)}
    assert records["mlp"].at_low_pulse == 0.0031 and records["cnn"].at_low_pulse is None
    report = build_report(list(records.values()), None)
    rows = {row["model"]: row for row in csv.DictReader(io.StringIO(render_csv(report)))}
    assert float(rows["mlp"]["at_low_pulse_s"]) == 0.0031 and rows["cnn"]["at_low_pulse_s"] == ""
    payload = {row["m"]: row for row in build_payload("t", [], report)["rows"]}
    assert payload["builtin/mlp"]["alp"] == 0.0031 and payload["builtin/cnn"]["alp"] is None
