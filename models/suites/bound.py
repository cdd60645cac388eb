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

from models.base import BuilderSuite

#: big_matmul's matrix side (its "batch size"), and with reduced models.
MATMUL_SIDE, REDUCED_MATMUL_SIDE = 4096, 256


class BoundSuite(BuilderSuite):
    name = "bound"
    order = 25
    builder = "bound"
    batch_sizes = {"host_sleep": 8, "tiny_kernels": 8, "big_matmul": MATMUL_SIDE}

    def default_batch_size(self, model_name: str) -> int:
        if model_name == "big_matmul" and self.reduced:
            return REDUCED_MATMUL_SIDE
        return super().default_batch_size(model_name)


SUITE = BoundSuite
