"""Write the cases of benchmarks/fidelity.sh for the whole of the harness's two lists.

    python benchmarks/fidelity_cases.py [--reference DIR] [--training N] > cases.txt

Every model of DIR/huggingface_models_list.txt (bf16) and DIR/timm_models_list.txt (amp)
that our suites have, at the list's batch size, in inference with inductor's default mode;
then N of them (default 16) in training (amp), spread evenly over both lists. Hub
checkpoints (names with '/') need downloaded weights and are left out, with a comment. No
torch is imported.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.workload_parity import DEFAULT_REFERENCE, listed_models  # noqa: E402

HEADER = "# suite        model                                batch  precision  mode     test"


def listed(reference: Path) -> list[tuple[str, str, int]]:
    """(suite, our model name, batch size) in the lists' order; hub names left out."""
    from models import get_suite

    known = {suite: set(get_suite(suite).model_names()) for suite in ("huggingface", "timm")}
    return [(model.suite, model.our_name, model.batch_size) for model in listed_models(reference)
            if model.our_name in known[model.suite]]


def spread(items: list, count: int) -> list:
    """`count` items evenly spaced over `items` (all of them when there are fewer)."""
    if count >= len(items):
        return list(items)
    return [items[round(index * (len(items) - 1) / (count - 1))] for index in range(count)] \
        if count > 1 else items[:1]


def case(suite: str, model: str, batch: int, precision: str, test: str) -> str:
    return f"{suite:<14} {model:<36} {batch:<6} {precision:<10} default  {test}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--training", type=int, default=16,
                        help="how many models also run in training (default %(default)s)")
    options = parser.parse_args(argv)
    models = listed(options.reference)
    skipped = [line.split(",")[0] for line in
               (options.reference / "huggingface_models_list.txt").read_text().splitlines()
               if "/" in line]
    print(HEADER)
    if skipped:
        print(f"# left out (hub checkpoints, not offline): {', '.join(skipped)}")
    for suite, model, batch in models:
        print(case(suite, model, batch, "bf16" if suite == "huggingface" else "amp", "eval"))
    for suite, model, batch in spread(models, options.training):
        print(case(suite, model, batch, "amp", "train"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
