"""Peak TFLOP/s per device model, and a line's achieved TFLOP/s and fraction of peak.

The peaks are dense (no structured sparsity) Tensor Core figures for TF32, BF16 and FP16,
and the CUDA-core figure for FP32, from NVIDIA's datasheets; the datasheets give the Tensor
Core figures with 2:4 sparsity, twice the dense ones, which are used here. Where a device is
not in the table, the line says so (`no_peak_reason`) instead of guessing.

The precision a line used is what its matmuls ran in: bf16 or fp16 for those precisions (and
for amp, its autocast dtype), and for fp32 on CUDA TF32 unless full fp32 was asked for
(`--matmul-precision highest` or `--disable-tf32`), as torch sets it (docs/timing.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from core.figures import median_time


@dataclass(frozen=True)
class DevicePeaks:
    """Dense peak TFLOP/s of one device model, by precision, and where they come from."""

    name: str
    #: A regular expression matched (case-insensitive) against the device's name as torch
    #: reports it (torch.cuda.get_device_name).
    pattern: str
    fp32: float
    tf32: float
    bf16: float
    fp16: float
    source: str

    def peak(self, precision: str) -> Optional[float]:
        return getattr(self, precision, None)


H100_DATASHEET = "NVIDIA H100 Tensor Core GPU datasheet (Tensor Core figures halved: the datasheet gives them with sparsity)"
H200_DATASHEET = "NVIDIA H200 Tensor Core GPU datasheet (Tensor Core figures halved: the datasheet gives them with sparsity)"
A100_DATASHEET = "NVIDIA A100 Tensor Core GPU datasheet (dense figures; the sparsity ones are twice these)"

#: Most specific first: the first pattern that matches names the device.
PEAKS: tuple[DevicePeaks, ...] = (
    DevicePeaks("H200 NVL", r"H200.*NVL", 60.0, 417.5, 835.5, 835.5, H200_DATASHEET),
    DevicePeaks("H200 SXM", r"H200", 67.0, 494.7, 989.4, 989.4, H200_DATASHEET),
    DevicePeaks("H100 NVL", r"H100.*NVL", 60.0, 417.5, 835.5, 835.5, H100_DATASHEET),
    DevicePeaks("H100 PCIe", r"H100.*PCIe", 51.2, 378.0, 756.0, 756.0, H100_DATASHEET),
    # The SXM5 part reports itself as "NVIDIA H100 80GB HBM3".
    DevicePeaks("H100 SXM", r"H100", 67.0, 494.7, 989.4, 989.4, H100_DATASHEET),
    # SXM4 and PCIe, 40 and 80 GB, share these peaks.
    DevicePeaks("A100", r"A100", 19.5, 156.0, 312.0, 312.0, A100_DATASHEET),
)


def device_peaks(accelerator: Optional[str], accelerator_model: Optional[str]) -> Optional[DevicePeaks]:
    """The peaks of a CUDA device by its name, or None when the table has none."""
    if accelerator != "cuda" or not accelerator_model:
        return None
    for peaks in PEAKS:
        if re.search(peaks.pattern, accelerator_model, re.IGNORECASE):
            return peaks
    return None


def precision_used(experiment: Mapping[str, Any]) -> str:
    """The precision the experiment's matmuls ran in: fp32, tf32, bf16 or fp16."""
    precision = experiment.get("precision") or "fp32"
    accelerator = experiment.get("accelerator")
    if precision in ("bf16", "fp16"):
        return precision
    if precision == "amp":
        return experiment.get("amp_dtype") or ("fp16" if accelerator == "cuda" else "bf16")
    full = experiment.get("matmul_precision") == "highest" or experiment.get("disable_tf32")
    return "tf32" if accelerator == "cuda" and not full else "fp32"


def throughput(line: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """Achieved TFLOP/s and the fraction of the device's peak for the precision used, from
    the line's `workload.flops_per_iteration` and its median time; None without a FLOP
    count or a time."""
    workload = line.get("workload")
    flops = workload.get("flops_per_iteration") if isinstance(workload, dict) else None
    if not isinstance(flops, (int, float)) or isinstance(flops, bool) or flops <= 0:
        return None
    seconds = median_time(line)
    if seconds is None or seconds <= 0:
        return None
    experiment = line.get("experiment") if isinstance(line.get("experiment"), dict) else {}
    precision = precision_used(experiment)
    tflops = flops / seconds / 1e12
    record: dict[str, Any] = {"flops_per_iteration": flops, "tflops": tflops,
                              "precision": precision, "peak_tflops": None,
                              "fraction_of_peak": None}
    model = experiment.get("accelerator_model")
    peaks = device_peaks(experiment.get("accelerator"), model)
    if peaks is None:
        record["no_peak_reason"] = (f"no peak known for {experiment.get('accelerator')} device "
                                    f"{model or '(unnamed)'}")
        return record
    peak = peaks.peak(precision)
    record.update(device=peaks.name, peak_tflops=peak, peak_source=peaks.source,
                  fraction_of_peak=tflops / peak if peak else None)
    return record
