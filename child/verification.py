"""Child-side glue between an experiment and the verifier: fresh models, same seed.

Each run reseeds torch, loads a fresh model, prepares it, runs `iterations` steps on the
inputs of the seed and returns the last step's result on the CPU; `verifier.procedure`
decides what the results mean.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional

import backends
from backends.base import PreparedModel, Stack
from core.config import ModelConfig, ExperimentConfig, RunSettings
from core.schema import Verdict
from models.base import BenchmarkModel, Suite
from verifier.procedure import verify
from verifier.tolerance import tolerance_for

log = logging.getLogger(__name__)


def run_steps(prepared: PreparedModel, bench: BenchmarkModel, seed: int, iterations: int = 1) -> Any:
    """`iterations` steps on the inputs of `seed`; the last step's result on the CPU."""
    if iterations < 1:
        raise ValueError(f"verify iterations must be at least 1, got {iterations}")
    device_inputs = prepared.inputs_to_device(bench.make_inputs(seed))
    result = None
    for _ in range(iterations):
        result = prepared.step(device_inputs)
        prepared.sync_iteration()
    prepared.sync_run(result)
    return prepared.result_to_host(result)


def make_run(
    load: Callable[[], BenchmarkModel],
    prepare: Callable[[BenchmarkModel], PreparedModel],
    seed: int,
    iterations: int = 1,
) -> Callable[[], Any]:
    """A callable for `verify`: fresh model from `seed`, prepared, run, result on the CPU."""

    def run() -> Any:
        import torch

        torch.manual_seed(seed)
        bench = load()
        return run_steps(prepare(bench), bench, seed, iterations)

    return run


def verify_experiment(
    model: ModelConfig,
    experiment: ExperimentConfig,
    settings: RunSettings,
    suite: Suite,
    stack: Stack,
    nondeterministic_reason: Optional[str] = None,
) -> Verdict:
    """Run eager twice, fp64 where it can run, and the experiment, each on a fresh model."""
    import torch

    from backends.runtimes.fp64 import Fp64PreparedModel, fp64_unsupported_reason
    from models.dropout import keep_dropout_kernels

    # Deterministic kernels, so two eager runs agree where the model itself is deterministic.
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False

    def load():
        # Two training steps must agree: dropout draws as in the harness, dropping nothing.
        bench = suite.load(model.model_name, experiment.test, experiment.batch_size,
                           seed=experiment.seed)
        keep_dropout_kernels(bench.module)
        return bench

    stack.initialize_process(experiment)
    reference = stack.reference_experiment(experiment)
    reference_stack = backends.get_stack(reference.stack)
    seed, iterations = experiment.seed, settings.verify_iterations
    run_eager = make_run(load, lambda b: reference_stack.prepare(b, reference, settings),
                         seed, iterations)
    run_fp64 = None
    if fp64_unsupported_reason(reference) is None:
        run_fp64 = make_run(load, lambda b: Fp64PreparedModel(b, reference), seed, iterations)
    run_experiment = make_run(load, lambda b: stack.prepare(b, experiment, settings),
                              seed, iterations)
    return verify(
        run_eager, run_fp64, run_experiment,
        tolerance=tolerance_for(experiment.precision, experiment.test, model.suite_name,
                                experiment.torch_matmul_precision(), model=model.model_name,
                                device=experiment.accelerator),
        nondeterministic_reason=nondeterministic_reason,
    )
