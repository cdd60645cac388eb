"""CSV files in the shape of PyTorch's benchmark harness (benchmarks/dynamo), one per configuration.

PyTorch's compiler dashboard (the HUD) reads one performance file per compiler, suite,
dtype, mode and device, named as the nightly job names them:
`{compiler}_{suite}_{dtype}_{mode}_{device}_performance.csv`, for example
`inductor_no_cudagraphs_torchbench_bfloat16_inference_cuda_performance.csv`, with the columns
`dev,name,batch_size,speedup,abs_latency,compilation_latency,compression_ratio,eager_peak_mem,
dynamo_peak_mem,calls_captured,unique_graphs,graph_breaks,unique_graph_breaks`, and an
accuracy file (`..._accuracy.csv`: `dev,name,batch_size,accuracy,calls_captured,
unique_graphs,graph_breaks,unique_graph_breaks`) where experiments were verified.

Our names map as follows: the compiler is the stack (inductor's modes: default ->
`inductor_no_cudagraphs`, cudagraphs -> `inductor_with_cudagraphs`, dynamic ->
`inductor_dynamic`, max-autotune -> `inductor_max_autotune`; other stacks keep their label
with `+`/`:` made `_`); precision fp32/bf16/fp16/amp -> float32/bfloat16/float16/amp; test
eval/train -> inference/training; suite timm -> timm_models. The baseline stack (eager) gets
no file: it is every row's reference. Units are the harness's: abs_latency in ms,
compilation_latency in s, peak memory in GB (device memory only). As the harness does, an
experiment that failed gets a row with speedup 0; a value that was not measured is empty
(the compression ratio and peak memory on CPU, where only the process's RSS is known).
"""

from __future__ import annotations

import re
from typing import Optional

from core.schema import Status, VerificationCode
from reports.analyse.aggregate import Report, Row
from reports.read.record import ConfigKey
from reports.render.csv_writer import write_csv

PERFORMANCE_FIELDS = [
    "dev", "name", "batch_size", "speedup", "abs_latency", "compilation_latency", "compression_ratio",
    "eager_peak_mem", "dynamo_peak_mem", "calls_captured", "unique_graphs", "graph_breaks",
    "unique_graph_breaks",
]
ACCURACY_FIELDS = [
    "dev", "name", "batch_size", "accuracy", "calls_captured", "unique_graphs", "graph_breaks",
    "unique_graph_breaks",
]
_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "amp": "amp"}
_MODES = {"eval": "inference", "train": "training"}
_SUITES = {"timm": "timm_models"}
_INDUCTOR_MODES = {"": "no_cudagraphs", "default": "no_cudagraphs", "cudagraphs": "with_cudagraphs",
                   "dynamic": "dynamic", "max-autotune": "max_autotune"}
_ACCURACY = {
    VerificationCode.PASS.value: "pass",
    VerificationCode.FAIL.value: "fail_accuracy",
    VerificationCode.EXCEPTION_RAISED.value: "fail_to_run",
    VerificationCode.EAGER_FAILED.value: "eager_fail_to_run",
    VerificationCode.NONDETERMINISTIC_EAGER_RUN.value: "eager_two_runs_differ",
}
#: The columns of numbers (every other is text, guarded by reports.render.csv_writer).
_NUMBERS = frozenset(PERFORMANCE_FIELDS) - {"dev", "name"}
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]+")


def _safe(text: str) -> str:
    return _UNSAFE.sub("_", text).strip("_") or "unknown"


def compiler_name(config: ConfigKey) -> str:
    if config.stack == "inductor":
        name = "inductor_" + _INDUCTOR_MODES.get(config.mode, _safe(config.mode))
    else:
        name = _safe(config.stack) + (f"_{_safe(config.mode)}" if config.mode else "")
    if config.xla_flags:
        name += "_flags_" + _safe(config.xla_flags)
    if config.extras:
        name += "_" + _safe(config.extras)
    return name


def file_stem(config: ConfigKey, suite: str) -> str:
    """`{compiler}_{suite}_{dtype}_{mode}_{device}` for one configuration and suite."""
    return "_".join([
        compiler_name(config),
        _safe(_SUITES.get(suite, suite or "unknown")),
        _DTYPES.get(config.precision, _safe(config.precision)),
        _MODES.get(config.test, _safe(config.test)),
        _safe(config.accelerator),
    ])


def _num(value: Optional[float], digits: int = 6) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _count(value: Optional[float]) -> str:
    return "" if value is None else str(int(value))


def _gb(value: Optional[int]) -> str:
    return "" if value is None else f"{value / 1e9:.6f}"


def _graphs(row: Row) -> list[str]:
    r = row.record
    return [_count(r.calls_captured), _count(r.unique_graphs), _count(r.graph_breaks),
            _count(r.unique_graph_breaks)]


def _performance_row(row: Row) -> list[str]:
    r = row.record
    batch = str(r.batch_size) if r.batch_size is not None else "0"
    if not r.ran:
        return [r.config.accelerator, r.model, batch, "0.000000", "0.000000", "0.000000", "", "", ""] + _graphs(row)
    device = r.memory_kind == "device"
    eager_peak = r.eager_peak_device_memory
    if eager_peak is None and device and row.baseline is not None and row.baseline.memory_kind == "device":
        eager_peak = row.baseline.peak_memory
    return [
        r.config.accelerator, r.model, batch,
        _num(row.speedup) if row.speedup is not None else "0.000000",
        _num(r.median_time * 1e3),
        _num(r.compile_time) if r.compile_time is not None else "",
        _num(row.compression_ratio),
        _gb(eager_peak) if device else "",
        _gb(r.peak_memory) if device else "",
    ] + _graphs(row)


def render_hud_csv(report: Report) -> dict[str, str]:
    """File name -> CSV text, for every configuration but the baseline's, per suite."""
    groups: dict[str, list[Row]] = {}
    for row in report.rows:
        record = row.record
        if record.config.stack == report.baseline or record.status == Status.SKIPPED:
            continue
        groups.setdefault(file_stem(record.config, record.suite), []).append(row)
    files: dict[str, str] = {}
    for stem, members in sorted(groups.items()):
        members.sort(key=lambda r: (r.record.model, r.record.batch_size or 0))
        files[f"{stem}_performance.csv"] = write_csv(
            PERFORMANCE_FIELDS, (_performance_row(row) for row in members), numbers=_NUMBERS)
        verified = [row for row in members
                    if row.record.status == Status.OK and row.record.verification_code in _ACCURACY]
        if verified:
            verified += [row for row in members if row.record.status == Status.FAILED]
            verified.sort(key=lambda r: (r.record.model, r.record.batch_size or 0))
            files[f"{stem}_accuracy.csv"] = write_csv(ACCURACY_FIELDS, (
                [row.record.config.accelerator, row.record.model,
                 str(row.record.batch_size) if row.record.batch_size is not None else "0",
                 "fail_to_run" if row.record.status == Status.FAILED else _ACCURACY[row.record.verification_code],
                 *_graphs(row)] for row in verified), numbers=_NUMBERS)
    return files
