"""benchmarks/fidelity_table.py: the harness's CSV and our line side by side, by test."""

from __future__ import annotations

import json

from benchmarks import fidelity_table


def our_line(test: str, eager: float, speedup: float, flops: int) -> dict:
    return {"model": {"model_name": "mobilenetv2_100"}, "status": "ok",
            "experiment": {"precision": "amp", "mode": "default", "test": test,
                           "requested_batch_size": 128, "accelerator_model": "NVIDIA H100"},
            "summary": {"paired_speedup": {"eager_median_per_iter_time": eager, "speedup": speedup},
                        "processes": {"spread": 0.031}, "dynamo_unique_graphs": 1,
                        "dynamo_graph_breaks": 0},
            "workload": {"flops_per_iteration": flops},
            "environment": {"packages": {"torch": "2.11.0"}}}


def test_rows_by_test_with_differences_agreement_and_achieved_rate(tmp_path, capsys):
    (tmp_path / "ours").mkdir()
    (tmp_path / "ours" / "results.jsonl").write_text(
        json.dumps(our_line("eval", 0.010, 2.0, 10**11)) + "\n"
        + json.dumps(our_line("train", 0.030, 1.5, 3 * 10**11)) + "\n")
    header = "dev,name,batch_size,speedup,abs_latency,unique_graphs,graph_breaks\n"
    (tmp_path / "peer-timm-mobilenetv2_100-amp-default-eval.csv").write_text(
        header + "cuda,mobilenetv2_100,128,2.0,5.0,2,1\n")
    (tmp_path / "peer-timm-mobilenetv2_100-amp-default-train.csv").write_text(
        header + "cuda,mobilenetv2_100,128,1.2,25.0,1,0\n")
    cases = tmp_path / "cases.txt"
    cases.write_text("timm mobilenetv2_100 128 amp default eval\n"
                     "timm mobilenetv2_100 128 amp default train\n")
    assert fidelity_table.main(tmp_path, cases) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| mobilenetv2_100")]
    assert "| eval |" in rows[0] and "+0.0%" in rows[0] and "| 20.0 |" in rows[0]
    assert rows[0].endswith("| 3.1% | 2/1, 1/0 |")
    assert "| train |" in rows[1] and "-20.0%" in rows[1] and "+25.0%" in rows[1]
    assert "1 of 2 rows with both figures agree within 5%" in out
    assert "NVIDIA H100" in out


def test_a_line_run_at_the_suite_default_batch_size_matches_its_case():
    """fidelity.sh runs a group of cases at their models' default batch sizes without
    --batch-size: such a line has no requested batch size, and its used one is the case's."""
    line = our_line("eval", 0.010, 2.0, 10**11)
    line["experiment"].update(requested_batch_size=None, batch_size=128)
    assert fidelity_table.our_line([line], "mobilenetv2_100", "128", "amp", "default", "eval") is line
    assert fidelity_table.our_line([line], "mobilenetv2_100", "64", "amp", "default", "eval") is None
