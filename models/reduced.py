"""The switch for reduced ("small") model configurations, used by tests and CI.

A reduced model keeps its architecture family but has fewer layers, a smaller hidden size,
a smaller vocabulary, smaller inputs and default batch sizes of at most 4, so it builds and runs in well under a second on a CPU.
Suites take `reduced=True`, or read EXPERIMENT_RUNNER_SMALL_MODELS when `reduced` is None.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from models.base import Suite

SMALL_MODELS_ENV = "EXPERIMENT_RUNNER_SMALL_MODELS"
# Default batch sizes are capped at this in reduced mode (an explicit batch size is kept).
REDUCED_MAX_BATCH_SIZE = 4
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def reduced_requested(
    reduced: Optional[bool] = None, environ: Optional[Mapping[str, str]] = None
) -> bool:
    """`reduced` when given, else the EXPERIMENT_RUNNER_SMALL_MODELS setting."""
    if reduced is not None:
        return reduced
    value = (os.environ if environ is None else environ).get(SMALL_MODELS_ENV, "")
    value = value.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"{SMALL_MODELS_ENV}={value!r} is not a boolean; use 1 or 0"
    )


class ReducibleSuite(Suite):
    """A suite whose models are listed in `specs` (name -> spec with a batch_size) and
    that can build reduced versions, with default batch sizes capped when reduced."""

    specs: Mapping[str, Any] = {}

    def __init__(self, reduced: Optional[bool] = None) -> None:
        self.reduced = reduced_requested(reduced)

    def model_names(self) -> list[str]:
        return list(self.specs)

    def default_batch_size(self, model_name: str) -> int:
        self.check_model(model_name)
        batch_size = self.specs[model_name].batch_size
        return min(batch_size, REDUCED_MAX_BATCH_SIZE) if self.reduced else batch_size
