"""The bound suite (models/suites/bound.py): its models build and run on the CPU."""

from __future__ import annotations

import time

import torch

from models import get_suite
from models.builders.bound import SLEEP_SECONDS


def run(bench):
    inputs = bench.make_inputs(1)
    start = time.perf_counter()
    with torch.no_grad():
        output = bench.module(*inputs.args)
    return output, time.perf_counter() - start


def test_each_model_runs_and_host_sleep_sleeps():
    suite = get_suite("bound", reduced=True)
    assert suite.model_names() == ["host_sleep", "tiny_kernels", "big_matmul"]
    assert suite.default_batch_size("big_matmul") == 256
    assert get_suite("bound").default_batch_size("big_matmul") == 4096
    outputs = {}
    for name in suite.model_names():
        bench = suite.load(name, "eval", None)
        outputs[name], seconds = run(bench)
        assert torch.isfinite(outputs[name]).all()
        if name == "host_sleep":
            assert seconds >= SLEEP_SECONDS
    assert outputs["big_matmul"].shape == (256, 256)
    assert outputs["tiny_kernels"].shape == (8, 64)
