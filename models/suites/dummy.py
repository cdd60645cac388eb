"""The dummy suite: PyTorch/XLA's runner's one-model suite (`--suite-name=dummy`).

One model, `dummy`: an MLP 32 -> 512 -> 512 -> 32 with ReLUs and a softmax, batch size 16,
as in PyTorch/XLA's benchmarks. Its training loss (which PyTorch/XLA's dummy leaves
unimplemented) is the negative log-likelihood of random class targets.
"""

from __future__ import annotations

from typing import Optional

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel, Suite

MODEL_NAME = "dummy"
BATCH_SIZE = 16


class DummySuite(Suite):
    name = "dummy"
    order = 15

    def model_names(self) -> list[str]:
        return [MODEL_NAME]

    def default_batch_size(self, model_name: str) -> int:
        self.check_model(model_name)
        return BATCH_SIZE

    def load(self, model_name: str, test: str, batch_size: Optional[int],
             seed: int = DEFAULT_SEED) -> BenchmarkModel:
        self.check_model(model_name)
        from models.builders import dummy as builder

        return builder.build(batch_size or BATCH_SIZE, seed=seed)


SUITE = DummySuite
