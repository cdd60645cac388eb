"""Percent of peak (core/host/peaks.py): the table, the precision used, a line's throughput."""

from __future__ import annotations

import pytest

from core.config import ExperimentConfig, ModelConfig, RunSettings
from core.host.peaks import PEAKS, device_peaks, precision_used, throughput
from core.schema import ResultLine, Status, VerificationCode


@pytest.mark.parametrize("name, expected", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200 SXM"),
    ("NVIDIA H200 NVL", "H200 NVL"),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA A100-PCIE-40GB", "A100"),
])
def test_device_names_as_torch_reports_them_find_their_peaks(name, expected):
    assert device_peaks("cuda", name).name == expected


def test_no_peak_for_a_device_not_in_the_table_or_not_cuda():
    assert device_peaks("cuda", "NVIDIA GeForce RTX 4090") is None
    assert device_peaks("cpu", "AMD EPYC 7B13") is None


def test_every_peak_names_its_source_and_tensor_cores_beat_fp32():
    for peaks in PEAKS:
        assert "datasheet" in peaks.source
        assert peaks.fp32 < peaks.tf32 < peaks.bf16 == peaks.fp16


@pytest.mark.parametrize("experiment, used", [
    ({"accelerator": "cuda", "precision": "fp32", "matmul_precision": "high"}, "tf32"),
    ({"accelerator": "cuda", "precision": "fp32", "matmul_precision": "highest"}, "fp32"),
    ({"accelerator": "cuda", "precision": "fp32", "disable_tf32": True}, "fp32"),
    ({"accelerator": "cpu", "precision": "fp32"}, "fp32"),
    ({"accelerator": "cuda", "precision": "bf16"}, "bf16"),
    ({"accelerator": "cuda", "precision": "amp"}, "fp16"),
    ({"accelerator": "cuda", "precision": "amp", "amp_dtype": "bf16"}, "bf16"),
    ({"accelerator": "cpu", "precision": "amp"}, "bf16"),
])
def test_the_precision_used(experiment, used):
    assert precision_used(experiment) == used


def cuda_line(flops, times, model="NVIDIA H100 80GB HBM3", precision="bf16", processes=None):
    line = {"experiment": {"accelerator": "cuda", "accelerator_model": model,
                           "precision": precision, "matmul_precision": "high"},
            "metrics": {"per_iter_time": [5.0, *times]},
            "summary": {"cold_start_entries": 1}}
    if processes is not None:
        line["summary"]["processes"] = {"median": processes}
    if flops is not None:
        line["workload"] = {"flops_per_iteration": flops}
    return line


def test_achieved_tflops_and_the_fraction_of_peak():
    # 1e12 FLOPs in 2 ms: 500 TFLOP/s, about half of the H100's dense bf16 peak.
    achieved = throughput(cuda_line(1e12, [0.001, 0.002, 0.003]))
    assert achieved["tflops"] == pytest.approx(500.0)
    assert achieved["precision"] == "bf16" and achieved["peak_tflops"] == 989.4
    assert achieved["fraction_of_peak"] == pytest.approx(500.0 / 989.4)
    assert achieved["device"] == "H100 SXM" and "datasheet" in achieved["peak_source"]
    # With several processes the figure is their median.
    assert throughput(cuda_line(1e12, [0.001], processes=0.004))["tflops"] == pytest.approx(250.0)


def test_a_device_without_a_peak_says_so_and_no_flop_count_gives_nothing():
    achieved = throughput(cuda_line(1e12, [0.002], model="NVIDIA GeForce RTX 4090"))
    assert achieved["tflops"] == pytest.approx(500.0) and achieved["fraction_of_peak"] is None
    assert achieved["no_peak_reason"] == "no peak known for cuda device NVIDIA GeForce RTX 4090"
    assert throughput(cuda_line(None, [0.002])) is None
    assert throughput({**cuda_line(1e12, [0.002]), "workload": {"flops_per_iteration": None}}) is None


def test_the_results_line_carries_it_when_it_has_a_workload():
    experiment = ExperimentConfig(accelerator="cuda", xla=None, dynamo=None, torch_xla2=None,
                                  test="eval", precision="fp32")
    line = ResultLine(ModelConfig("builtin", "mlp"), experiment, RunSettings(), Status.OK,
                      VerificationCode.VERIFIER_SKIPPED, accelerator_model="NVIDIA A100-SXM4-80GB",
                      metrics={"per_iter_time": [1.0, 0.01]}, summary={"cold_start_entries": 1})
    assert "throughput" not in line.to_dict()["summary"]
    written = line.to_dict()
    written["workload"] = {"flops_per_iteration": 1e12}
    assert throughput(written)["fraction_of_peak"] == pytest.approx(100.0 / 156.0)
