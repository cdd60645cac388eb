"""Check the timing loop against CUDA events (run on a GPU machine).

For each model and stack, the timed runs of the runner's own loop (perf_counter around
iterations that end with torch.cuda.synchronize) are bracketed by CUDA events; the script
prints the median per-iteration time both ways and their difference, which should stay
within 2%.

    python -m benchmarks.cuda_timing [--repeat 30] [--iterations 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys


CASES = (
    # suite, model, batch size, precision, dynamo, mode
    ("timm", "mobilenetv2_100", 128, "amp", None, None),
    ("timm", "mobilenetv2_100", 128, "amp", "inductor", "default"),
    ("huggingface", "BertForMaskedLM", 16, "bf16", None, None),
    ("huggingface", "BertForMaskedLM", 16, "bf16", "inductor", "default"),
    ("huggingface", "BertForMaskedLM", 16, "bf16", "inductor", "cudagraphs"),
)


def measure_case(case, repeat: int, iterations: int) -> tuple[float, float]:
    import torch

    from api import apply_numerics, get_suite, input_seeds, stack_for, timed_run, warm_up
    from core.config import ExperimentConfig, RunSettings

    suite_name, model_name, batch_size, precision, dynamo, mode = case
    experiment = ExperimentConfig("cuda", None, dynamo, None, "eval", precision=precision,
                                  batch_size=batch_size, mode=mode,
                                  fp16_bf16_reduction_math_sdp=True)
    stack = stack_for(experiment)
    experiment = stack.planned(experiment, {})
    settings = RunSettings(repeat=repeat, iterations_per_run=iterations, warmup=3)
    apply_numerics(experiment)  # as the runner's child sets them
    bench = get_suite(suite_name).load(model_name, "eval", batch_size)
    prepared = stack.prepare(bench, experiment, settings)
    inputs = [prepared.inputs_to_device(bench.make_inputs(seed)) for seed in input_seeds(settings)]
    warm_up(prepared, inputs, settings.warmup)
    ours, events = [], []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        elapsed, _ = timed_run(prepared, inputs, iterations)
        end.record()
        end.synchronize()
        ours.append(elapsed / iterations)
        events.append(start.elapsed_time(end) / 1e3 / iterations)
    return statistics.median(ours), statistics.median(events)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--iterations", type=int, default=1)
    args = parser.parse_args()
    print(f"{'model':<18} {'precision':<9} {'stack':<20} {'ours ms':>9} {'events ms':>10} {'diff':>7}")
    for case in CASES:
        ours, events = measure_case(case, args.repeat, args.iterations)
        label = case[4] + (f":{case[5]}" if case[5] not in (None, "default") else "") if case[4] else "eager"
        print(f"{case[1]:<18} {case[3]:<9} {label:<20} {ours * 1e3:>9.3f} {events * 1e3:>10.3f} "
              f"{(ours - events) / events:>+7.2%}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
