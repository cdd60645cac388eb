"""The contract between suites and the rest of the runner.

A suite lists its models without importing torch (the parent uses it) and builds a
`BenchmarkModel` in the child. Weights are random and inputs seeded: nothing downloads.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

from core.fields import DEFAULT_SEED

if TYPE_CHECKING:  # torch is imported only by children
    import torch


class UnknownModelError(ValueError):
    """A model name the suite does not have."""


class SuiteUnavailableError(RuntimeError):
    """A suite whose library is missing; the message says how to get it."""


@dataclass
class ModelInputs:
    """Positional and keyword arguments of one forward call, and the loss's targets."""

    args: tuple
    kwargs: dict[str, Any]
    targets: Any = None


def eager_as_the_harness(loss_fn: Callable) -> Callable:
    """`loss_fn` kept out of compiled graphs: a loss standing for the harness's
    `reduce_to_scalar_loss` (timm's and TorchBench's). That lives in torch._dynamo.testing, a
    module dynamo skips, so the harness's compiled iteration breaks there, its graph returns
    the model's output, and the loss runs eagerly (benchmarks/fidelity/graph_parity.py compares)."""
    import torch

    return torch._dynamo.disable(loss_fn)


@dataclass
class BenchmarkModel:
    """A model ready to run: module, seeded input factory and training loss."""

    name: str
    module: "torch.nn.Module"
    make_inputs: Callable[[int], ModelInputs]
    loss_fn: Callable[[Any, ModelInputs], "torch.Tensor"]
    batch_size: int
    # Names that make a result known to differ between two eager runs (verifier).
    nondeterministic_reason: Optional[str] = None
    # The optimizer PyTorch's harness trains this model with on CUDA: adam, sgd or none.
    harness_optimizer: str = "adam"
    # Inductor settings PyTorch's harness compiles this model with (config name -> value);
    # inductor experiments compile with them.
    inductor_settings: dict[str, Any] = field(default_factory=dict)


class Suite(ABC):
    """A named collection of models."""

    name: str = ""
    # Place in suite_names(): lower first; equal orders go by name.
    order: int = 100
    #: Libraries every model of the suite imports, which a fork server may import once for
    #: all the suite's children (libraries only: no model, no device state).
    preload: tuple[str, ...] = ()

    def __init__(self, *, reduced: bool = False, torchbench_dir: Optional[str] = None) -> None:
        """Options every suite takes; a suite that has no use for one ignores it.

        `reduced` asks for small model configurations (models.reduced); `torchbench_dir`
        locates a TorchBench checkout.
        """
        self.reduced = bool(reduced)
        self.torchbench_dir = torchbench_dir

    @abstractmethod
    def model_names(self) -> list[str]:
        """Every model of the suite, in a stable order (no torch import)."""

    @abstractmethod
    def default_batch_size(self, model_name: str) -> int:
        """The batch size used when the user sets none."""

    @abstractmethod
    def load(self, model_name: str, test: str, batch_size: Optional[int],
             seed: int = DEFAULT_SEED) -> BenchmarkModel:
        """Build the model in fp32 with random weights drawn from `seed` (child only), on
        torch's default device: the CPU, or the device the child builds under
        (child/worker.py: build_device). Its inputs come from the seeds `make_inputs`
        is given, on the CPU, whatever the default device when it is called. Its dropout is
        PyTorch's harness's (models/dropout.py)."""

    def skip_reason(self, model_name: str, test: str,
                    precision: Optional[str] = None) -> Optional[str]:
        """Why this model cannot run this test (at this precision), or None when it can."""
        return None

    def tiers(self) -> Mapping[int, Sequence[str]]:
        """Named groups of models (--filter-by-tier, --exclude-by-tier); {} when the suite
        has none. Names may include models this installation lacks."""
        return {}

    def check_model(self, model_name: str) -> None:
        if model_name not in self.model_names():
            raise UnknownModelError(
                f"model {model_name!r} is not in suite {self.name!r}; "
                f"its models are: {', '.join(self.model_names())}"
            )


class BuilderSuite(Suite):
    """A suite whose models one builder module makes (`models/builders/<builder>.py`, its
    `build(name, batch_size, seed=)`), each with a default batch size."""

    #: The builder module's name under models.builders (imported by the child alone).
    builder: str = ""
    #: Every model of the suite, in order, with its default batch size.
    batch_sizes: Mapping[str, int] = {}

    def model_names(self) -> list[str]:
        return list(self.batch_sizes)

    def default_batch_size(self, model_name: str) -> int:
        self.check_model(model_name)
        return self.batch_sizes[model_name]

    def load(self, model_name: str, test: str, batch_size: Optional[int],
             seed: int = DEFAULT_SEED) -> BenchmarkModel:
        self.check_model(model_name)
        builder = importlib.import_module(f"models.builders.{self.builder}")
        return builder.build(model_name, batch_size or self.default_batch_size(model_name),
                             seed=seed)
