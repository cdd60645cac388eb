"""The builtin suite: a few small models made for fast CPU runs."""

from __future__ import annotations

from typing import Optional

from core.fields import DEFAULT_SEED
from models.base import BenchmarkModel, Suite

_BATCH_SIZES = {"mlp": 16, "cnn": 8, "transformer_block": 4}


class BuiltinSuite(Suite):
    name = "builtin"
    order = 10

    def model_names(self) -> list[str]:
        return list(_BATCH_SIZES)

    def default_batch_size(self, model_name: str) -> int:
        self.check_model(model_name)
        return _BATCH_SIZES[model_name]

    def load(self, model_name: str, test: str, batch_size: Optional[int],
             seed: int = DEFAULT_SEED) -> BenchmarkModel:
        self.check_model(model_name)
        from models.builders import builtin as builder

        return builder.build(model_name, batch_size or _BATCH_SIZES[model_name], seed=seed)


SUITE = BuiltinSuite
