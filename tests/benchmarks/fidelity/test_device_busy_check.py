"""benchmarks/fidelity/device_busy_check.py and benchmarks/stability/host_states.py: the two tools'
kernel time per case, and each timing process beside its host state (stand-in lines)."""

from __future__ import annotations

import json

import pytest

from benchmarks.fidelity import device_busy_check
from benchmarks.fidelity.settings_parity import Case
from benchmarks.stability import host_states
from core.host.host_state import summarize


def line(model, busy_ms, eager_busy_ms, reason=None):
    fast = {"cpu_start": [2, 2], "cpu_end": [2, 2], "freq_mhz": [3000.0, 3000.0],
            "involuntary_switches": [0, 0]}
    slow = {"cpu_start": [5, 6], "cpu_end": [6, 6], "freq_mhz": [1500.0, 1600.0],
            "involuntary_switches": [3, 0]}
    return {
        "model": {"model_name": model}, "status": "ok",
        "experiment": {"precision": "bf16", "mode": "default", "test": "eval",
                       "requested_batch_size": 8},
        "summary": {
            "device_busy_ms": busy_ms, "eager_device_busy_ms": eager_busy_ms,
            "device_busy": {"ms": busy_ms, "reason": reason, "spread": 0.01,
                            "processes_ms": [busy_ms, busy_ms]},
            "host_bound_fraction": 1.0,
            "processes": {"medians": [0.0025, 0.0041], "eager_medians": [0.005, 0.0082]},
            "reference_processes": [{"during": {"host_ms": 0.61}}, {"during": {"host_ms": 1.08}}],
            "host_state": {**summarize({}), "processes": [summarize(fast), summarize(slow)]},
        }}


def test_both_tools_kernel_time_side_by_side_and_the_processes_host_states(capsys):
    cases = [Case.parse("timm mobilevit_s 8 bf16 default eval"),
             Case.parse("timm tf_efficientnet_b0 8 bf16 default eval"),
             Case.parse("timm ghostnet_100 8 bf16 default eval")]
    lines = [line("mobilevit_s", 2.611, 9.5), line("tf_efficientnet_b0", 3.0, 7.0)]
    harness = {cases[0]: {"compiled": 2.590, "eager": 9.4}, cases[1]: {"compiled": 2.5, "eager": 7.0},
               cases[2]: {"error": "the harness made no compiled trace"}}
    assert device_busy_check.report(cases, lines, harness) == 0
    out = capsys.readouterr().out
    rows = [text for text in out.splitlines() if text.startswith("| mobilevit_s")
            or text.startswith("| tf_efficientnet_b0") or text.startswith("| ghostnet_100")]
    assert "| 2.590 | 2.611 | +0.8% | 9.400 | 9.500 | +1.1% | 1.0% | 100% |" in rows[0]
    assert "| +20.0% |" in rows[1]
    assert "the harness made no compiled trace" in rows[2] and "no line of ours" not in rows[2]
    assert "1 of 2 rows: ours' compiled device busy time within 5%" in out
    # Each of our processes beside its pulse: the slow one moved, ran slower cores.
    assert ("| mobilevit_s | eval | 1 | 2.50 | 5.00 | 0.61 | 2.611 | 2 | 0% | 0% | - | - | - "
            "| 3000 | - | - |") in out
    assert ("| mobilevit_s | eval | 2 | 4.10 | 8.20 | 1.08 | 2.611 | 5,6 | 50% | 50% | - | - "
            "| - | 1550 | - | - |") in out


def test_host_states_reads_results_files(tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(line("mobilevit_s", 2.611, 9.5)) + "\n")
    assert host_states.main([str(results)]) == 0
    assert "| mobilevit_s | eval | 2 | 4.10 |" in capsys.readouterr().out


def per_run_line():
    """Two processes of six runs: process 1 fast but for its last two runs, process 2 slow
    but for its first three; each run's time follows its pulse."""
    pulses = [[0.6, 0.6, 0.62, 0.61, 1.1, 1.2], [0.6, 0.61, 0.6, 1.1, 1.15, 1.2]]
    times = [[0.004, 0.0041, 0.0042, 0.0040, 0.007, 0.008],
             [0.0043, 0.0044, 0.0045, 0.0070, 0.0072, 0.0074]]
    return {"model": {"model_name": "mobilevit_s"}, "status": "ok",
            "experiment": {"test": "eval"},
            "metrics": {"per_iter_time": [9.0, *times[0], *times[1]],
                        "process": [1] * 7 + [2] * 6},
            "summary": {"cold_start_entries": 1,
                        "reference_processes": [{"during": {"pulses_ms": p}} for p in pulses]}}


def test_by_pulse_gives_each_lines_figure_over_all_runs_and_in_each_state(tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(per_run_line()) + "\n")
    assert host_states.main([str(results), "--by-pulse", "--fast-bound", "0.8"]) == 0
    out = capsys.readouterr().out
    # All runs: the processes' medians 4.15 and 5.75 ms; fast: 4.05 and 4.40 (7 of 12 runs);
    # slow: only process 2 has three slow runs (7.20 ms). At the low pulse (0.8 / 1.25 =
    # 0.64 ms), every run scaled: the processes' medians 4.27 and 4.33 ms.
    assert "fast state: a pulse of at most 0.800 ms" in out
    row = next(text for text in out.splitlines() if text.startswith("| mobilevit_s"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[:3] == ["mobilevit_s", "eval", "12"] and float(cells[3]) > 0.9
    assert cells[4:] == ["4.95", "4.22", "58%", "7.20", "2/1", "4.30"]
    # Without a bound: 1.25 times the pulses' 10th percentile (0.6 ms here).
    assert host_states.fast_bound_of([per_run_line()]) == 1.25 * 0.6


def test_by_pulse_refuses_a_bound_that_is_no_time(tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(per_run_line()) + "\n")
    with pytest.raises(SystemExit) as stop:
        host_states.main([str(results), "--by-pulse", "--fast-bound", "-1"])
    assert stop.value.code == 2
    assert "--fast-bound must be a number of milliseconds above 0, not -1.0" in capsys.readouterr().err
