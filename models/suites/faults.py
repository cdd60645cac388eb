"""The faults suite: models that fail on purpose, so failure handling is tested for real.

Each fails inside its forward call, in the child's timing loop:
raises (an exception), segfault (SIGSEGV), exit (os._exit), signal (SIGTERM to itself),
hang (sleeps forever, with a grandchild process of its own), memory_hog (allocates until
stopped). Only the child ever builds them.
"""

from __future__ import annotations

from typing import Optional

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel, Suite

FAULT_MODELS = ("raises", "segfault", "exit", "signal", "hang", "memory_hog")


class FaultsSuite(Suite):
    name = "faults"
    order = 20

    def model_names(self) -> list[str]:
        return list(FAULT_MODELS)

    def default_batch_size(self, model_name: str) -> int:
        self.check_model(model_name)
        return 2

    def load(self, model_name: str, test: str, batch_size: Optional[int],
             seed: int = DEFAULT_SEED) -> BenchmarkModel:
        self.check_model(model_name)
        from models.builders import faults as builder

        return builder.build(model_name, batch_size or 2, seed=seed)


SUITE = FaultsSuite
