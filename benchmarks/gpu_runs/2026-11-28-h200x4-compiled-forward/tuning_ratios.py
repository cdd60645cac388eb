"""How two processes' tuning timed the same Triton kernels (docs/fidelity.md, twelfth session).

Reads the tuning logs that `TORCH_LOGS=+torch._inductor.runtime.triton_heuristics` writes
(every `.log` under each folder) and, for each kernel both processes tuned, takes the median
over its configurations of (process B's time / process A's time). Prints the median and the
range of those per-kernel ratios, apart for the kernels that write into an argument
(`in_out_ptr` in their signature in inductor's `output_code.py`, which both tools generate
alike) and for the others.

    python tuning_ratios.py OUTPUT_CODE FOLDER_A FOLDER_B
"""

import re
import statistics
import sys
from pathlib import Path

KERNEL_HEADER = re.compile(r"Benchmark all input configs for (\w+), get:")
CONFIG_TIME = re.compile(r"triton_heuristics\.py:\d+\] (\w+: .*?maxnreg: \w+): ([0-9.]+), nreg")


def in_place_kernels(output_code: Path) -> set[str]:
    text = output_code.read_text()
    return {match.group(1) for match in re.finditer(r"def (triton_\w+)\(([^)]*)\)", text)
            if "in_out_ptr" in match.group(2)}


def tuning_times(folder: Path) -> dict[str, dict[str, float]]:
    """{kernel: {configuration: ms}}, each kernel's first tuning in the folder's logs."""
    times: dict[str, dict[str, float]] = {}
    for log in sorted(folder.glob("**/*.log")):
        kernel = None
        for line in log.read_text(errors="replace").splitlines():
            header = KERNEL_HEADER.search(line)
            if header:
                kernel = header.group(1)
                times.setdefault(kernel, {})
                continue
            config = CONFIG_TIME.search(line)
            if config and kernel:
                times[kernel].setdefault(config.group(1), float(config.group(2)))
    return times


def main(output_code: str, folder_a: str, folder_b: str) -> None:
    in_place = in_place_kernels(Path(output_code))
    a, b = tuning_times(Path(folder_a)), tuning_times(Path(folder_b))
    ratios: dict[bool, list[float]] = {True: [], False: []}
    for kernel, configs in a.items():
        shared = [b[kernel][config] / ms for config, ms in configs.items()
                  if config in b.get(kernel, {}) and ms > 0]
        if shared:
            ratios[kernel in in_place].append(statistics.median(shared))
    for writes, label in ((True, "in-place"), (False, "other")):
        values = ratios[writes]
        if values:
            print(f"{label} kernels {len(values)}: median ratio {statistics.median(values):.2f} "
                  f"(range {min(values):.2f}-{max(values):.2f})")


if __name__ == "__main__":
    main(*sys.argv[1:4])
