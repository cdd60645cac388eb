"""torchax on JAX (torch_xla2=extract_jax / torch_export), end to end on CPU."""

from __future__ import annotations

import json

import pytest
import torch

from core.host.machine import HostCapabilities
from backends.stacks.torchax import TorchaxStack
from core.config import ExperimentConfig
from tests.backends.conftest import RUNS, assert_per_run, by_key, describe_failures
from tests.conftest import PROJECT_ROOT, cli_environment

JAX_METRICS = ("jax_compile_count", "jax_compile_time_s", "jax_jit_cache_size")
HOST = HostCapabilities(
    torch_version=torch.__version__,
    packages={"torchax": "0.0.13", "jax": "0.10.2", "jaxlib": "0.10.2"},
)


def torchax(mode="extract_jax", test="eval", **kwargs) -> ExperimentConfig:
    return ExperimentConfig(kwargs.pop("accelerator", "cpu"), kwargs.pop("xla", None),
                            kwargs.pop("dynamo", None), mode, test, **kwargs)


def test_rejects_xla_dynamo_and_autocast_of_exported_graphs():
    backend = TorchaxStack()
    assert backend.invalid_reason(torchax(), HOST) is None
    assert backend.invalid_reason(torchax("torch_export", "train"), HOST) is None
    assert backend.invalid_reason(torchax(precision="amp"), HOST) is None
    assert "runs without xla and dynamo" in backend.invalid_reason(torchax(xla="PJRT"), HOST)
    assert "runs without xla and dynamo" in backend.invalid_reason(
        torchax(dynamo="inductor"), HOST)
    assert "cannot autocast" in backend.invalid_reason(
        torchax("torch_export", precision="amp"), HOST)


def test_child_environment_picks_the_jax_platform_and_flags():
    backend = TorchaxStack()
    assert backend.child_environment(torchax()) == {"JAX_PLATFORMS": "cpu"}
    assert backend.child_environment(torchax(accelerator="cuda", xla_flags="--a=1")) == {
        "JAX_PLATFORMS": "cuda", "XLA_FLAGS": "--a=1"}


@pytest.mark.e2e
def test_mlp_both_modes_eval_and_train_write_jax_metrics(sweep, tmp_path):
    dump = tmp_path / "jax-dump"
    lines = sweep("--torch-xla2=extract_jax", "--torch-xla2=torch_export", "--test=eval",
                  "--test=train", "-k", "^mlp$", f"--xla-flags=--xla_dump_to={dump}")
    assert len(lines) == 4
    assert not describe_failures(lines), describe_failures(lines)
    for line in lines:
        metrics, summary = line["metrics"], line["summary"]
        assert_per_run(metrics, JAX_METRICS + ("per_iter_time",), runs=RUNS)
        # One jitted function compiled once, in the cold-start run (the first entry of each
        # per-run list): the timed runs compile nothing.
        assert metrics["jax_compile_count"][0] >= 1 and metrics["jax_compile_count"][1:] == [0, 0]
        assert metrics["jax_jit_cache_size"] == [1, 1, 1], metrics
        assert summary["jax_compile_count_total"] >= 1
        assert summary["jax_compile_time_total_s"] > 0
        assert summary["cold_start_time"] > max(metrics["per_iter_time"][1:])
        assert "paired_speedup" not in summary  # torchax cannot share a process with eager
        assert line["environment"]["variables"]["JAX_PLATFORMS"] == "cpu"
        assert line["environment"]["torchax"] and line["environment"]["jax"]
    assert dump.is_dir() and any(dump.iterdir())


@pytest.mark.e2e
def test_every_builtin_model_trains_with_extract_jax(sweep):
    lines = sweep("--torch-xla2=extract_jax", "--test=train", "-x", "^mlp$")
    assert {line["model"]["model_name"] for line in lines} == {"cnn", "transformer_block"}
    assert not describe_failures(lines), describe_failures(lines)


@pytest.fixture(scope="module")
def torchax_server():
    """A fork server preloading what the torchax stack's servers preload (torch, JAX): each
    parity child is forked from it, as fresh as a new interpreter (no torchax environment,
    no JAX backend yet), without importing both again (seconds of each child)."""
    from runner.run.process.forkserver_client import ForkServer

    server = ForkServer(TorchaxStack.preload, parity_environment())
    yield server
    server.close()


def parity_environment() -> dict[str, str]:
    return {**cli_environment(), "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"}


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["extract_jax", "torch_export"])
def test_cnn_gradients_match_eager_through_max_pooling(mode, torchax_server):
    """JAX differentiates torchax's max pooling only through the runner's override."""
    child = torchax_server.start("tests.fixtures.fork_children",
                                 ["torchax_parity", "cnn", mode, "train"],
                                 parity_environment(), str(PROJECT_ROOT))
    output = child.stdout.read().decode()
    assert child.wait(timeout=300) == 0, output[-3000:]
    errors = json.loads(next(line for line in reversed(output.splitlines())
                             if line.startswith("{")))
    assert len(errors) > 1
    assert max(errors.values()) < 1e-4, errors
