"""Each timing process's figure beside its host pulse and the host's state it met: what
moves with the host's two states (docs/timing.md, "The host's state per timed run").

    python -m benchmarks.host_states RESULTS.jsonl [RESULTS.jsonl ...]

One row per timing process of each line that ran: the process's median compiled (and eager)
time per iteration, its host pulse (the median of the pulses read during its timed runs),
the device's busy time per iteration (CUDA), then what `summary.host_state` summed up over
its timed runs: the CPUs its timing thread ran on, the share of runs in which it moved to
another CPU, was preempted or waited for a CPU, its time waiting and the steal, the CPU
frequency's and the card's SM clock's medians, and the card's performance states.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.files.results_file import read_results

HEADER = ("model", "test", "process", "ours ind.", "ours eager", "pulse", "busy", "cpus",
          "moved", "preempted", "waited", "waited ms", "steal ms", "MHz", "SM MHz", "pstates")


def _ms(seconds: Any) -> str:
    return f"{seconds * 1e3:.2f}" if isinstance(seconds, (int, float)) else "-"


def _share(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, (int, float)) else "-"


def _number(value: Any, digits: int = 0) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "-"


def _median(value: Any) -> Optional[float]:
    return value.get("median") if isinstance(value, dict) else None


def process_rows(line: dict[str, Any]) -> list[list[str]]:
    """A line's rows: one per timing process (one for a line of a single process)."""
    summary = line.get("summary") or {}
    processes = summary.get("processes") or {}
    state = summary.get("host_state") or {}
    states = state.get("processes") or [state]
    compiled = processes.get("medians") or [None] * len(states)
    eager = processes.get("eager_medians") or [None] * len(states)
    references = summary.get("reference_processes") or [summary.get("reference")] * len(states)
    busy = summary.get("device_busy") or {}
    busy_each = busy.get("processes_ms") or [busy.get("ms")] * len(states)
    if not processes:  # one process: its figure is its timed runs' median
        paired = summary.get("paired_speedup") or {}
        eager_ms = paired.get("eager_median_per_iter_time")
        compiled = [eager_ms / paired["speedup"] if eager_ms and paired.get("speedup") else None]
        eager = [eager_ms]
    rows = []
    for index, process_state in enumerate(states):
        process_state = process_state or {}
        reference = references[index] if index < len(references) else None
        pulse = ((reference or {}).get("during") or {}).get("host_ms")
        rows.append([
            line["model"]["model_name"], line["experiment"]["test"], str(index + 1),
            _ms(compiled[index] if index < len(compiled) else None),
            _ms(eager[index] if index < len(eager) else None),
            _number(pulse, 2), _number(busy_each[index] if index < len(busy_each) else None, 3),
            ",".join(map(str, process_state.get("cpus") or [])) or "-",
            _share(process_state.get("moved_share")), _share(process_state.get("preempted_share")),
            _share(process_state.get("waited_share")), _number(process_state.get("waited_ms"), 1),
            _number(process_state.get("steal_ms"), 0), _number(_median(process_state.get("freq_mhz"))),
            _number(_median(process_state.get("gpu_sm_mhz"))),
            ",".join(map(str, process_state.get("gpu_pstates") or [])) or "-",
        ])
    return rows


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+", help="results files (JSON lines)")
    options = parser.parse_args(argv)
    missing = [str(path) for path in options.results if not path.is_file()]
    if missing:
        parser.error(f"no such results file: {', '.join(missing)}")
    print("| " + " | ".join(HEADER) + " |")
    print("| " + " | ".join("---" for _ in HEADER) + " |")
    for path in options.results:
        for line in read_results(path).lines:
            if line.get("status") == "ok":
                for row in process_rows(line):
                    print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
