"""Fixtures shared by the suite tests: reduced suites, the TorchBench stand-in, a train step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FAKE_TORCHBENCH = REPO_ROOT / "tests" / "fixtures" / "fake_torchbench"


@pytest.fixture
def fake_torchbench_dir(monkeypatch) -> Path:
    """The stand-in checkout; sys.path and the imported torchbenchmark modules are restored."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield FAKE_TORCHBENCH
    for name in [m for m in sys.modules if m == "torchbenchmark" or m.startswith("torchbenchmark.")]:
        del sys.modules[name]


@pytest.fixture
def no_torchbench(monkeypatch):
    """No importable torchbenchmark."""
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        if name == "torchbenchmark":
            return None
        return real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def train_step(bench):
    """One forward and backward in train mode; returns the loss and the parameters' grads."""
    inputs = bench.make_inputs(0)
    bench.module.train(True)
    output = bench.module(*inputs.args, **inputs.kwargs)
    loss = bench.loss_fn(output, inputs)
    loss.backward()
    grads = {n: p.grad for n, p in bench.module.named_parameters() if p.requires_grad}
    return loss, grads


def eval_forward(bench, seed: int = 0):
    import torch

    inputs = bench.make_inputs(seed)
    bench.module.train(False)
    with torch.no_grad():
        return bench.module(*inputs.args, **inputs.kwargs)


def run_listing_without_torch(
    suite: str, *, reduced: bool = False, torchbench_dir: str | None = None
) -> dict:
    """List a suite in a fresh interpreter; report its names and whether torch got imported."""
    import json

    code = (
        "import json, sys, models\n"
        f"suite = models.get_suite({suite!r}, reduced={reduced!r},"
        f" torchbench_dir={torchbench_dir!r})\n"
        "names = suite.model_names()\n"
        "sizes = {n: suite.default_batch_size(n) for n in names}\n"
        "heavy = [m for m in ('torch', 'timm', 'transformers') if m in sys.modules]\n"
        "print(json.dumps({'names': names, 'sizes': sizes, 'heavy': heavy}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT,
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])
