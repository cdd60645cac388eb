"""Child-side glue between an experiment and the verifier: fresh models, same seed."""

from __future__ import annotations

import logging
from typing import Optional

from backends.base import Backend
from models.base import Suite
from runner.config import ExperimentConfig, ModelConfig, RunSettings
from verifier.codes import Verdict
from verifier.procedure import verify
from verifier.runs import Fp64PreparedModel, fp64_unsupported_reason, make_run, reference_experiment
from verifier.tolerance import tolerance_for

log = logging.getLogger(__name__)


def verify_experiment(
    model: ModelConfig,
    experiment: ExperimentConfig,
    settings: RunSettings,
    suite: Suite,
    backend: Backend,
    nondeterministic_reason: Optional[str] = None,
) -> Verdict:
    """Run eager twice, fp64 where it can run, and the experiment, each on a fresh model."""
    import torch

    import backends

    # Deterministic kernels, so two eager runs agree where the model itself is deterministic.
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False

    def load():
        return suite.load(model.model_name, experiment.test, experiment.batch_size)

    backend.initialize_process(experiment)
    reference = reference_experiment(experiment)
    reference_backend = backends.backend_for(reference)
    seed, iterations = settings.seed, settings.verify_iterations
    run_eager = make_run(load, lambda b: reference_backend.prepare(b, reference, settings),
                         seed, iterations)
    run_fp64 = None
    if fp64_unsupported_reason(experiment) is None:
        run_fp64 = make_run(load, lambda b: Fp64PreparedModel(b, experiment), seed, iterations)
    run_experiment = make_run(load, lambda b: backend.prepare(b, experiment, settings),
                              seed, iterations)
    return verify(
        run_eager, run_fp64, run_experiment,
        tolerance=tolerance_for(experiment.precision, experiment.test, model.suite_name,
                                experiment.matmul_precision),
        nondeterministic_reason=nondeterministic_reason,
    )

