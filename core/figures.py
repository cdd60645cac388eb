"""A results line's timed runs and its figure, its median time per iteration, and its compiled
code's kernel digests (pure: read by core.schema, core.host.peaks, the runner's summary, the
reports and the benchmarks alike)."""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Optional

#: The summary key saying how many leading entries of each per-run list are the cold start.
COLD_START_ENTRIES = "cold_start_entries"


def metrics_of(line: Mapping[str, Any]) -> dict[str, Any]:
    """The line's metrics, or {} when missing or not an object."""
    metrics = line.get("metrics")
    return metrics if isinstance(metrics, dict) else {}


def cold_start_entries(line: Mapping[str, Any]) -> int:
    """How many leading entries of the line's per-run lists are the cold start (0 for lines
    written before the cold start joined those lists)."""
    summary = line.get("summary")
    count = (summary if isinstance(summary, dict) and COLD_START_ENTRIES in summary
             else metrics_of(line)).get(COLD_START_ENTRIES)
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0


def timed_values(line: Mapping[str, Any], name: str) -> list[Any]:
    """The timed runs' values of the per-run metric `name`: the cold-start entries left out.

    Medians and intervals of the steady state come from these; PyTorch/XLA's tools read the
    whole list, whose first entry carries compilation."""
    values = metrics_of(line).get(name)
    if not isinstance(values, list):
        return []
    return values[cold_start_entries(line):]


def median_time(line: Mapping[str, Any]) -> Optional[float]:
    """The line's figure in seconds: the median over its timing processes where it had
    several, else the median of its timed runs; None without a positive time."""
    summary = line.get("summary")
    processes = summary.get("processes") if isinstance(summary, dict) else None
    if isinstance(processes, dict) and isinstance(processes.get("median"), (int, float)):
        return float(processes["median"])
    timed = [t for t in timed_values(line, "per_iter_time")
             if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0]
    return statistics.median(timed) if timed else None


# The compiled code, told apart by the digests of the kernels one iteration launched
# (`summary.device_busy.digests`, child/device_busy.py): `kernels` digests the kernels' names
# and counts, `launches` the same with each launch's grid and block. Two compiles of one graph
# launch the same kernels; inductor tunes each kernel at its first launch in every compile,
# and where it kept another configuration the launches differ.

OTHER_KERNELS = "other kernels (the compiled code differs)"
TUNED_OTHERWISE = "the same kernels tuned otherwise (other launch shapes)"


def kernel_digests_of(line: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    """A results line's kernel digests, or None where it has none (off CUDA, older lines, a
    digest of the kernels missing)."""
    busy = (line.get("summary") or {}).get("device_busy")
    digests = busy.get("digests") if isinstance(busy, Mapping) else None
    return digests if isinstance(digests, Mapping) and digests.get("kernels") else None


def compiled_code_difference(first: Optional[Mapping[str, Any]],
                             second: Optional[Mapping[str, Any]]) -> str:
    """What two lines' digests say of their compiled code: OTHER_KERNELS, TUNED_OTHERWISE, or
    '' where they agree or either lacks them."""
    if not (first and second and first.get("kernels") and second.get("kernels")):
        return ""
    if first["kernels"] != second["kernels"]:
        return OTHER_KERNELS
    if first.get("launches") and second.get("launches") and \
            first["launches"] != second["launches"]:
        return TUNED_OTHERWISE
    return ""
