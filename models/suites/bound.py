"""The bound suite: models whose speed is held back by one side on purpose, to check the
host-bound flag (docs/timing.md) on a device that runs queued work (CUDA).

- `host_sleep`: a small matrix product, then a 2 ms Python sleep inside forward: the
  device finishes long before the host queues the next work (host-bound);
- `tiny_kernels`: 400 elementwise operations on a small tensor: one kernel launch each, too
  short to keep the device busy (host-bound, launch-bound);
- `big_matmul`: products of two square matrices of the batch size's side (default 4096;
  256 with reduced models): the host queues them in microseconds and the device works
  (device-bound).

Only the child builds them (models/builders/bound.py).
"""

from __future__ import annotations

from typing import Optional

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel, Suite

BOUND_MODELS = ("host_sleep", "tiny_kernels", "big_matmul")
#: big_matmul's matrix side (its "batch size"), and with reduced models.
MATMUL_SIDE, REDUCED_MATMUL_SIDE = 4096, 256


class BoundSuite(Suite):
    name = "bound"
    order = 25

    def model_names(self) -> list[str]:
        return list(BOUND_MODELS)

    def default_batch_size(self, model_name: str) -> int:
        self.check_model(model_name)
        if model_name == "big_matmul":
            return REDUCED_MATMUL_SIDE if self.reduced else MATMUL_SIDE
        return 8

    def load(self, model_name: str, test: str, batch_size: Optional[int],
             seed: int = DEFAULT_SEED) -> BenchmarkModel:
        self.check_model(model_name)
        from models.builders import bound as builder

        return builder.build(model_name, batch_size or self.default_batch_size(model_name),
                             seed=seed)


SUITE = BoundSuite
