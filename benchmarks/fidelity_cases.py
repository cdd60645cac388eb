"""Write the cases of benchmarks/fidelity.sh: the whole of the harness's two lists, or cases
drawn at random over them.

    python -m benchmarks.fidelity_cases [--reference DIR] [--training N] > cases.txt
    python -m benchmarks.fidelity_cases --sample N --seed S [--reference DIR] > cases.txt
    python -m benchmarks.fidelity_cases --sweep N --seed S [--reference DIR] > cases.txt
    python -m benchmarks.fidelity_cases --flags harness|ours PRECISION MODE TEST BATCH

Without --sample: every model of DIR/huggingface_models_list.txt (bf16) and
DIR/timm_models_list.txt (amp) that our suites have, at the list's batch size, in inference
with inductor's default mode; then N of them (default 16) in training (amp), spread evenly
over both lists.

With --sample N --seed S: N distinct cases, each a model drawn from both whole lists, a mode
(default, cudagraphs), a precision (fp32, fp16, bf16, amp), a batch size (the list's own, a
smaller power of two, or 1) and a test (eval, train; at least a third of the cases train),
the same for the same seed. The header names the seed (and the models --exclude left out):
each new table uses a new one.

With --sweep N --seed S: the cases of a nightly sweep of N models drawn from each list, the same
for the same seed: each model in inference and in training, at amp, with inductor's default
mode and the list's batch size (fidelity.sh runs ours on them in one invocation per list).

--flags prints the flags each tool takes for a case (fidelity.sh runs both tools with them).
Hub checkpoints (names with '/') need downloaded weights and are left out, with a comment.
No torch is imported.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from benchmarks.workload_parity import DEFAULT_REFERENCE, listed_models  # noqa: F401

HEADER = "# suite        model                                batch  precision  mode     test"
MODES = ("default", "cudagraphs")
PRECISIONS = ("fp32", "fp16", "bf16", "amp")
TESTS = ("eval", "train")
#: The harness's flag for each precision (its common.py: --float32, --float16, --bfloat16,
#: --amp); ours takes --precision with the precision's own name.
HARNESS_PRECISION_FLAGS = {"fp32": "--float32", "fp16": "--float16", "bf16": "--bfloat16",
                           "amp": "--amp"}
#: The least share of drawn cases that train.
TRAINING_SHARE = 1 / 3


def listed(reference: Path) -> list[tuple[str, str, int]]:
    """(suite, our model name, batch size) in the lists' order; hub names left out."""
    from api import get_suite

    known = {suite: set(get_suite(suite).model_names()) for suite in ("huggingface", "timm")}
    return [(model.suite, model.our_name, model.batch_size) for model in listed_models(reference)
            if model.our_name in known[model.suite]]


def spread(items: list, count: int) -> list:
    """`count` items evenly spaced over `items` (all of them when there are fewer)."""
    if count >= len(items):
        return list(items)
    return [items[round(index * (len(items) - 1) / (count - 1))] for index in range(count)] \
        if count > 1 else items[:1]


def case(suite: str, model: str, batch: int, precision: str, test: str,
         mode: str = "default") -> str:
    return f"{suite:<14} {model:<36} {batch:<6} {precision:<10} {mode:<10} {test}"


def batch_sizes(listed_batch: int) -> list[int]:
    """The batch sizes a case of a model may take: the list's own, each smaller power of two
    (from 2), and 1."""
    smaller = [2 ** power for power in range(1, max(listed_batch - 1, 1).bit_length())
               if 2 ** power < listed_batch]
    return sorted({listed_batch, *smaller, 1})


def sample(models: list[tuple[str, str, int]], count: int, seed: int
           ) -> list[tuple[str, str, int, str, str, str]]:
    """`count` distinct cases (suite, model, batch, precision, mode, test) drawn with
    `random.Random(seed)`: the model uniformly over both lists; the batch size the list's own,
    a smaller power of two, or 1, each kind with even odds; mode, precision and test
    uniformly; then, where fewer than a third train, drawn eval cases turned to training."""
    rng = random.Random(seed)
    drawn: list[tuple[str, str, int, str, str, str]] = []
    seen: set[tuple] = set()
    limit = len(models) * len(MODES) * len(PRECISIONS) * len(TESTS) * 3
    if count > limit:
        raise ValueError(f"--sample {count}: at most {limit} distinct cases")
    while len(drawn) < count:
        suite, model, listed_batch = rng.choice(models)
        kinds = [[listed_batch], [b for b in batch_sizes(listed_batch) if 1 < b < listed_batch],
                 [1]]
        batch = rng.choice(rng.choice([kind for kind in kinds if kind]))
        drawn_case = (suite, model, batch, rng.choice(PRECISIONS), rng.choice(MODES),
                      rng.choice(TESTS))
        if drawn_case[:5] in seen:
            continue
        seen.add(drawn_case[:5])
        drawn.append(drawn_case)
    evals = [index for index, item in enumerate(drawn) if item[5] == "eval"]
    missing = math.ceil(count * TRAINING_SHARE) - (count - len(evals))
    for index in rng.sample(evals, max(missing, 0)):
        drawn[index] = drawn[index][:5] + ("train",)
    return drawn


def sweep(models: list[tuple[str, str, int]], count: int, seed: int
          ) -> list[tuple[str, str, int, str, str, str]]:
    """`count` models of each list drawn with `random.Random(seed)`, in the lists' order, each
    in eval and in train at amp, default mode and the list's batch size."""
    rng = random.Random(seed)
    chosen: list[tuple[str, str, int]] = []
    for suite in ("huggingface", "timm"):
        listed_models = [entry for entry in models if entry[0] == suite]
        if count > len(listed_models):
            raise ValueError(f"--sweep {count}: the {suite} list has {len(listed_models)} models")
        picked = set(rng.sample(range(len(listed_models)), count))
        chosen += [entry for index, entry in enumerate(listed_models) if index in picked]
    return [(suite, model, batch, "amp", "default", test)
            for suite, model, batch in chosen for test in TESTS]


def tool_flags(tool: str, precision: str, mode: str, test: str, batch: str) -> list[str]:
    """The flags of the case for PyTorch's harness or for our runner."""
    if precision not in PRECISIONS or mode not in MODES or test not in TESTS \
            or not batch.isdigit() or int(batch) < 1:
        raise ValueError(f"not a case: precision {precision!r} (one of {', '.join(PRECISIONS)}), "
                         f"mode {mode!r} (one of {', '.join(MODES)}), test {test!r} (eval or "
                         f"train), batch size {batch!r} (a positive integer)")
    if tool == "harness":
        flags = [HARNESS_PRECISION_FLAGS[precision],
                 "--training" if test == "train" else "--inference", "--batch-size", batch]
        # The harness records CUDA graphs unless told not to; ours only for the mode.
        return flags + ([] if mode == "cudagraphs" else ["--disable-cudagraphs"])
    if tool == "ours":
        return [f"--precision={precision}", f"--mode={mode}", f"--test={test}",
                f"--batch-size={batch}"]
    raise ValueError(f"--flags {tool!r}: harness or ours")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--training", type=int, default=16,
                        help="how many models also run in training (default %(default)s)")
    parser.add_argument("--sample", type=int, metavar="N",
                        help="draw N cases across models, modes, precisions, batch sizes, tests")
    parser.add_argument("--sweep", type=int, metavar="N",
                        help="draw N models of each list, each in eval and train at amp")
    parser.add_argument("--seed", type=int,
                        help="the draw's seed (with --sample or --sweep; required)")
    parser.add_argument("--exclude", action="append", default=[], metavar="MODEL",
                        help="leave this model out of the draw (repeatable; e.g. one the "
                             "harness cannot build offline); the header names it")
    parser.add_argument("--flags", nargs=5, metavar=("TOOL", "PRECISION", "MODE", "TEST", "BATCH"),
                        help="print the tool's (harness or ours) flags for a case, and exit")
    options = parser.parse_args(argv)
    if options.flags:
        try:
            print(" ".join(tool_flags(*options.flags)))
        except ValueError as error:
            print(error, file=sys.stderr)
            return 2
        return 0
    for flag, count in (("--sample", options.sample), ("--sweep", options.sweep)):
        if count is not None and (options.seed is None or count < 1):
            print(f"{flag} {count} needs a positive count and --seed", file=sys.stderr)
            return 2
    if options.sample is not None and options.sweep is not None:
        print("--sample and --sweep are two kinds of draw: give one", file=sys.stderr)
        return 2
    models = listed(options.reference)
    skipped = [line.split(",")[0] for line in
               (options.reference / "huggingface_models_list.txt").read_text().splitlines()
               if "/" in line]
    if options.sample is not None or options.sweep is not None:
        unknown = sorted(set(options.exclude) - {model for _, model, _ in models})
        if unknown:
            print(f"--exclude: {', '.join(unknown)} is not a model of the lists", file=sys.stderr)
            return 2
        models = [entry for entry in models if entry[1] not in options.exclude]
    excluded = "".join(f" --exclude {name}" for name in sorted(options.exclude))
    if options.sample is not None or options.sweep is not None:
        try:
            if options.sweep is not None:
                drawn = sweep(models, options.sweep, options.seed)
                what = f"the sweep of {options.sweep} models drawn from each list, in eval and train,"
                flag = f"--sweep {options.sweep}"
            else:
                drawn = sample(models, options.sample, options.seed)
                what = f"{options.sample} cases drawn over both whole lists ({len(models)} models)"
                flag = f"--sample {options.sample}"
        except ValueError as error:
            print(error, file=sys.stderr)
            return 2
        print(f"# seed {options.seed}: {what} by benchmarks/fidelity_cases.py {flag} "
              f"--seed {options.seed}{excluded}")
        print(HEADER)
        if skipped:
            print(f"# left out (hub checkpoints, not offline): {', '.join(skipped)}")
        if options.exclude:
            print(f"# left out (--exclude): {', '.join(sorted(options.exclude))}")
        for suite, model, batch, precision, mode, test in drawn:
            print(case(suite, model, batch, precision, test, mode))
        return 0
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
