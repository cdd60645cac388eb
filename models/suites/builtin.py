"""The builtin suite: a few small models made for fast CPU runs."""

from __future__ import annotations

from models.base import BuilderSuite

_BATCH_SIZES = {"mlp": 16, "cnn": 8, "transformer_block": 4}


class BuiltinSuite(BuilderSuite):
    name = "builtin"
    order = 10
    builder = "builtin"
    batch_sizes = _BATCH_SIZES


SUITE = BuiltinSuite
