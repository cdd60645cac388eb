"""Print PyTorch's harness and ours side by side (used by benchmarks/fidelity.sh).

    python benchmarks/fidelity_table.py OUT_DIR CASES_FILE

Reads the harness's CSVs (peer-<suite>-<model>-<precision>-<mode>.csv: speedup and
abs_latency, the compiled latency in ms) and our OUT_DIR/ours/results.jsonl (the compiled
median per iteration and the paired speedup of the same child).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path


def peer_row(out: Path, suite: str, model: str, precision: str, mode: str):
    path = out / f"peer-{suite}-{model}-{precision}-{mode}.csv"
    if not path.exists():
        return None
    # The harness names some timm models name.tag.
    rows = [row for row in csv.DictReader(path.open())
            if (row.get("name") or "").split(".")[0] == model]
    try:
        return rows[-1] if rows and float(rows[-1]["speedup"]) > 0 else None
    except (KeyError, ValueError):
        return None


def our_line(lines, model: str, precision: str, mode: str):
    for line in reversed(lines):
        experiment = line["experiment"]
        if (line["model"]["model_name"] == model and experiment["precision"] == precision
                and experiment.get("mode") == mode and line["status"] == "ok"):
            return line
    return None


def main(out: Path, cases: Path) -> int:
    results = out / "ours" / "results.jsonl"
    lines = [json.loads(text) for text in results.open()] if results.exists() else []
    header = ("model", "bs", "prec", "mode", "peer eager", "peer ind.", "peer x",
              "ours eager", "ours ind.", "ours x", "latency d", "speedup d")
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for text in cases.read_text().splitlines():
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        suite, model, batch, precision, mode = text.split()
        peer, ours = peer_row(out, suite, model, precision, mode), our_line(lines, model, precision, mode)
        cells = [model, batch, precision, mode]
        if peer:
            speedup, latency = float(peer["speedup"]), float(peer["abs_latency"])
            cells += [f"{latency * speedup:.2f} ms", f"{latency:.2f} ms", f"{speedup:.2f}x"]
        else:
            cells += ["-", "-", "-"]
        if ours and "paired_speedup" in ours.get("summary", {}):
            paired = ours["summary"]["paired_speedup"]
            compiled = paired["eager_median_per_iter_time"] / paired["speedup"]
            cells += [f"{paired['eager_median_per_iter_time'] * 1e3:.2f} ms",
                      f"{compiled * 1e3:.2f} ms", f"{paired['speedup']:.2f}x"]
        else:
            cells += ["-", "-", "-"]
        if peer and ours and "paired_speedup" in ours.get("summary", {}):
            cells += [f"{(compiled * 1e3 - latency) / latency:+.1%}",
                      f"{(paired['speedup'] - speedup) / speedup:+.1%}"]
        else:
            cells += ["-", "-"]
        print(" | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
