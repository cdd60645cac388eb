"""Which XLA stacks can run on which host, decided without starting their runtimes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

import backends
from core.host.machine import HostCapabilities
from models import get_suite
from runner import app as cli
from core.config import ExperimentConfig
from runner.plan.matrix import MatrixRequest, build_plan
from tests.conftest import PROJECT_ROOT, cli_environment

XLA_HOST = HostCapabilities(
    torch_version="2.9.0+cpu",
    packages={"torch": "2.9.0", "torch_xla": "2.9.0", "torchax": "0.0.13", "jax": "0.10.2",
              "jaxlib": "0.10.2"},
    dynamo_backends=("inductor", "openxla", "openxla_eval"),
)


def host(torch_version="2.9.0+cpu", cuda=False, **packages) -> HostCapabilities:
    found = {k.replace("_dash_", "-"): v for k, v in packages.items() if v is not None}
    return HostCapabilities(torch_version=torch_version, cuda_available=cuda, packages=found,
                            dynamo_backends=XLA_HOST.dynamo_backends)


def experiment(accelerator="cpu", xla="PJRT", dynamo=None, torch_xla2=None, test="eval"):
    return ExperimentConfig(accelerator, xla, dynamo, torch_xla2, test)


@pytest.mark.parametrize("dynamo", [None, "openxla"])
def test_pjrt_without_torch_xla_is_dropped(dynamo):
    reason = backends.invalid_reason(experiment(dynamo=dynamo), host())
    assert reason == "xla=PJRT needs torch_xla, which is not installed here"


@pytest.mark.parametrize("dynamo", [None, "openxla"])
def test_torch_xla_of_another_torch_release_is_dropped(dynamo):
    # The GPU machine: torch 2.11 with a torch_xla 2.9 wheel would not even import.
    reason = backends.invalid_reason(
        experiment(dynamo=dynamo), host("2.11.0+cu130", torch_xla="2.9.0"))
    assert reason == "torch_xla 2.9.0 needs torch 2.9.x, but torch 2.11.0+cu130 is installed"
    assert backends.invalid_reason(experiment(dynamo=dynamo), host(torch_xla="2.9.0")) is None


def test_xla_cuda_is_gone_after_2_8():
    reason = backends.invalid_reason(
        experiment("cuda"), host("2.9.0+cu128", cuda=True, torch_xla="2.9.0"))
    assert reason.startswith("XLA:CUDA was removed from torch_xla after 2.8")
    assert "use --torch-xla2 on CUDA" in reason
    older = host("2.8.0+cu128", cuda=True, torch_xla="2.8.0")
    assert backends.invalid_reason(experiment("cuda"), older) is None


def test_tpu_needs_libtpu_for_both_xla_and_torchax():
    without = host(torch_xla="2.9.0", torchax="0.0.13", jax="0.10.2", jaxlib="0.10.2")
    with_tpu = host(torch_xla="2.9.0", torchax="0.0.13", jax="0.10.2", jaxlib="0.10.2",
                    libtpu="0.0.21")
    for config in (experiment("tpu"), experiment("tpu", xla=None, torch_xla2="extract_jax")):
        assert "needs libtpu" in backends.invalid_reason(config, without)
        assert backends.invalid_reason(config, with_tpu) is None


def test_torchax_needs_torchax_and_jax():
    config = experiment(xla=None, torch_xla2="extract_jax")
    assert backends.invalid_reason(config, host(jax="0.10.2", jaxlib="0.10.2")) == (
        "torch_xla2=extract_jax needs torchax, not installed here")
    assert backends.invalid_reason(config, host(torchax="0.0.13")) == (
        "torch_xla2=extract_jax needs jax, jaxlib, not installed here")


def test_torchax_on_cuda_needs_a_jax_cuda_plugin():
    config = experiment("cuda", xla=None, torch_xla2="torch_export")
    base = {"torchax": "0.0.13", "jax": "0.11.2", "jaxlib": "0.11.2"}
    reason = backends.invalid_reason(config, host("2.11.0+cu130", cuda=True, **base))
    assert "needs JAX's CUDA plugin" in reason
    gpu = host("2.11.0+cu130", cuda=True, jax_dash_cuda13_dash_plugin="0.11.2", **base)
    assert backends.invalid_reason(config, gpu) is None


def test_plan_drops_pjrt_with_its_reason_when_torch_xla_is_missing():
    request = MatrixRequest.of(accelerator=("cpu",), xla=(None, "PJRT"), dynamo=(None,),
                            test=("eval",), filters=("^mlp$",))
    plan = build_plan(get_suite("builtin"), request, host())
    assert [(p.experiment.xla, p.experiment.dynamo) for p in plan.experiments] == [(None, None)]
    assert [d.reason for d in plan.dropped] == [
        "xla=PJRT needs torch_xla, which is not installed here"]


@pytest.mark.e2e
def test_seed_example_matrix_gives_the_four_experiments_per_model(capsys, tmp_path):
    code = cli.main(["--accelerator=cpu", "--xla=PJRT", "--xla=None", "--dynamo=openxla",
                     "--dynamo=inductor", "--dynamo=None", "--test=eval", "--dry-run",
                     f"--output-dirname={tmp_path}"])
    assert code == 0
    printed = capsys.readouterr().out
    found: dict[str, set[tuple[str, str]]] = {}
    for model, xla, dynamo in re.findall(r"^(\w+): cpu xla=(\S+) dynamo=(\S+) ", printed, re.M):
        found.setdefault(model, set()).add((xla, dynamo))
    expected = {("None", "None"), ("None", "inductor"), ("PJRT", "None"), ("PJRT", "openxla")}
    assert found == {name: expected for name in ("mlp", "cnn", "transformer_block")}
    assert "12 experiment(s) would run" in printed


PARENT_IMPORTS = """
import sys
from runner import app as cli
code = cli.main(["--accelerator=cpu", "--dry-run", "--test=eval", "--test=train",
                 "--output-dirname=" + sys.argv[1],
                 "--xla=PJRT", "--xla=None", "--dynamo=openxla", "--dynamo=None",
                 "--torch-xla2=extract_jax", "--torch-xla2=torch_export", "--torch-xla2=None"])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"torch_xla", "torchax", "jax"})
print("LOADED", __import__("json").dumps({"code": code, "loaded": loaded}))
"""


@pytest.mark.e2e
def test_the_parent_never_imports_torch_xla_torchax_or_jax(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-c", PARENT_IMPORTS, str(tmp_path)], capture_output=True, text=True,
        env=cli_environment(), cwd=str(PROJECT_ROOT), timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    answer = json.loads(completed.stdout.split("LOADED", 1)[1])
    assert answer == {"code": 0, "loaded": []}
    # The plan held every stack, so all five backends were asked.
    assert "torch_xla2=torch_export" in completed.stdout and "xla=PJRT dynamo=openxla" in completed.stdout


def test_an_unknown_backend_gets_the_closest_name_and_the_backends_a_user_picks():
    from backends.availability import unregistered_dynamo_reason

    known = HostCapabilities(torch_version="2.9.0", dynamo_backends=(
        "aot_eager", "inductor", "relu_compile_error_TESTING_ONLY", "dynamo_minifier_backend",
        "openxla"))
    assert unregistered_dynamo_reason("Inductor", known) is not None  # names are exact
    assert unregistered_dynamo_reason("inducter", known) == (
        "dynamo backend 'inducter' is not registered in torch 2.9.0; did you mean 'inductor'? "
        "backends: aot_eager, inductor, openxla")
    assert unregistered_dynamo_reason("xyz", known) == (
        "dynamo backend 'xyz' is not registered in torch 2.9.0; backends: aot_eager, inductor, "
        "openxla")
    assert unregistered_dynamo_reason("relu_compile_error_TESTING_ONLY", known) is None
