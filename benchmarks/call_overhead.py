"""The host's cost of one compiled inference call around its graph: a compiled module, called
under autocast, against our dynamo stack's eval step, which compiles the forward under
autocast as a function, as PyTorch's harness compiles its forward_pass.

    python -m benchmarks.call_overhead [--model SUITE:NAME ...] [--batch-size N]
        [--calls N] [--rounds N]

Each model is built by our suite on the CPU and compiled both ways with a dynamo backend
whose graph returns the outputs it computed once, so that a call costs only what surrounds
the graph. For the compiled module that is entering torch.no_grad and autocast, the
nn.Module call machinery of the OptimizedModule around the model and of the model itself,
then dynamo's guards and frame; for the step, entering torch.no_grad, then dynamo's guards
and frame (autocast is part of the graph). The two alternate, A B A B, `--rounds` times,
`--calls` calls each; the figures are the medians of all calls, in microseconds, and their
ratio.

On a GPU this cost adds to every timed iteration: an iteration starts on an idle card (the
last one ended with a synchronization), which waits for the host to reach the first kernel.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_MODELS = ("timm:convnextv2_nano", "timm:mobilenetv2_100",
                  "huggingface:BertForMaskedLM")
BACKEND = "call_overhead_replay"


def replay_backend(graph_module, example_inputs) -> Callable[..., Any]:
    """Runs the graph once, then returns those outputs on every call."""
    outputs = graph_module(*example_inputs)
    return lambda *args: outputs


def callables(suite_name: str, model_name: str, batch_size: int
              ) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(a compiled module's call, our dynamo stack's eval step) of one model: the module
    compiled by torch.compile and called under torch.no_grad and the precision's autocast,
    as our stack did before; and the step of our stack's prepared model."""
    import torch

    from api import DYNAMO_STACK as STACK
    from core.config import ExperimentConfig, RunSettings
    from api import get_suite

    if BACKEND not in torch._dynamo.list_backends(exclude_tags=()):
        torch._dynamo.register_backend(replay_backend, name=BACKEND)
    experiment = ExperimentConfig("cpu", None, BACKEND, None, "eval",
                                  precision="bf16" if suite_name == "huggingface" else "amp")
    bench = get_suite(suite_name).load(model_name, "eval", batch_size, seed=experiment.seed)
    prepared = STACK.prepare(bench, experiment, RunSettings())
    inputs = prepared.inputs_to_device(bench.make_inputs(experiment.seed))
    compiled_module = torch.compile(prepared.module, backend=replay_backend)

    def module_step():
        with torch.no_grad(), torch.autocast("cpu", dtype=prepared.autocast_dtype,
                                             enabled=prepared.autocast_dtype is not None):
            return compiled_module(*inputs.args, **inputs.kwargs)

    return module_step, lambda: prepared.step(inputs)


def call_microseconds(step: Callable[[], Any], calls: int) -> list[float]:
    """The time of each of `calls` calls of `step`, in microseconds."""
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        step()
        times.append((time.perf_counter() - started) * 1e6)
    return times


def measure(steps: tuple[Callable[[], Any], Callable[[], Any]], calls: int,
            rounds: int) -> tuple[float, float]:
    """The medians (µs) of the two steps' calls, measured A B A B."""
    for step in steps:  # compile, then settle
        for _ in range(10):
            step()
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for step, sample in zip(steps, samples):
            sample.extend(call_microseconds(step, calls))
    return statistics.median(samples[0]), statistics.median(samples[1])


def parse_model(text: str) -> tuple[str, str]:
    suite, separator, name = text.partition(":")
    if not separator or suite not in ("timm", "huggingface", "builtin") or not name:
        raise argparse.ArgumentTypeError(
            f"--model {text!r}: give SUITE:NAME, SUITE one of timm, huggingface, builtin")
    return suite, name


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", type=parse_model,
                        help=f"SUITE:NAME (repeatable; default {', '.join(DEFAULT_MODELS)})")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    models = args.model or [parse_model(text) for text in DEFAULT_MODELS]
    print("| model | compiled module, µs per call | our eval step, µs per call | ratio |")
    print("| --- | --- | --- | --- |")
    failed = 0
    for suite, name in models:
        try:
            module_us, function_us = measure(callables(suite, name, args.batch_size),
                                             args.calls, args.rounds)
        except Exception as error:  # the row names the model that failed, with its error
            print(f"| {suite}:{name} | failed: {type(error).__name__}: {error} | | |")
            failed += 1
            continue
        print(f"| {suite}:{name} | {module_us:.1f} | {function_us:.1f} | "
              f"{module_us / function_us:.2f} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
