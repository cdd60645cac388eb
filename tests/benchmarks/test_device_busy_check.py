"""benchmarks/device_busy_check.py and host_states.py: the two tools' kernel time per case, and
each timing process beside its host state (stand-in lines)."""

from __future__ import annotations

import json

from benchmarks import device_busy_check, host_states
from benchmarks.settings_parity import Case
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
