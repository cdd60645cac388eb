"""Reduced ("small") model configurations, used by tests and CI.

A reduced model keeps its architecture family but has fewer layers, a smaller hidden size,
a smaller vocabulary, smaller inputs and default batch sizes of at most 4, so it builds and
runs in well under a second on a CPU. Suites take `reduced=True`; nothing in models/ reads
the environment: the runner reads SMALL_MODELS_ENV and parses it with `parse_reduced_setting`.
"""

from __future__ import annotations

from typing import Any, Mapping

from models.base import Suite

SMALL_MODELS_ENV = "EXPERIMENT_RUNNER_SMALL_MODELS"
# Default batch sizes are capped at this in reduced mode (an explicit batch size is kept).
REDUCED_MAX_BATCH_SIZE = 4
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def parse_reduced_setting(text: str) -> bool:
    """1/true/yes/on or 0/false/no/off/"" (any case, spaces around ignored); else ValueError."""
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"{text!r} is not a boolean: use 1/true/yes/on or 0/false/no/off (or leave it empty)"
    )


class ReducibleSuite(Suite):
    """A suite whose models are listed in `specs` (name -> spec with a batch_size) and
    that can build reduced versions (`reduced=True`), with default batch sizes capped."""

    specs: Mapping[str, Any] = {}

    def model_names(self) -> list[str]:
        return list(self.specs)

    def default_batch_size(self, model_name: str) -> int:
        self.check_model(model_name)
        batch_size = self.specs[model_name].batch_size
        return min(batch_size, REDUCED_MAX_BATCH_SIZE) if self.reduced else batch_size
