"""Results brought to the host for the verifier (backends/runtimes/torch_device.to_cpu)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from backends.runtimes.torch_device import to_cpu  # noqa: E402
from verifier.tree import flatten  # noqa: E402


class Layer:
    def __init__(self, keys: torch.Tensor) -> None:
        self.keys, self.values, self.is_initialized = keys, keys * 2, True
        self.device = keys.device


class Cache:
    """Like a transformers cache: an object, not a container, holding tensors in layers."""

    def __init__(self, keys: torch.Tensor) -> None:
        self.layers = [Layer(keys), Layer(keys + 1)]
        self.offloading = False


def test_an_object_holding_tensors_becomes_the_mapping_of_those_attributes():
    keys = torch.arange(4.0)
    host = to_cpu({"logits": keys, "cache": Cache(keys)})
    assert set(host) == {"logits", "cache"}
    assert set(host["cache"]) == {"layers"}
    assert set(host["cache"]["layers"][1]) == {"keys", "values"}
    assert torch.equal(host["cache"]["layers"][1]["values"], (keys + 1) * 2)
    # So two runs' caches compare leaf by leaf (tensors), not by the objects' identity.
    leaves = flatten(to_cpu(Cache(keys)))
    assert len(leaves) == 4 and all(isinstance(leaf, torch.Tensor) for _, leaf in leaves)


def test_objects_without_tensors_stay_as_they_are():
    marker = object()
    assert to_cpu({"flag": marker})["flag"] is marker
    assert to_cpu(torch.float32) is torch.float32
